"""Models: the protocol metrics talk to (`interface`), the Hugging Face
backend (`handle`, the only owner of torch), the endpoint backend
(`endpoint`) and checkpoint validation (`checkpoint`). Nothing is imported
here, so importing the protocol loads no backend."""
