"""unlearnbench: a pytest-based benchmark harness for LLM unlearning."""

__version__ = "0.1.0"
