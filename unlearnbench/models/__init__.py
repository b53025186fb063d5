"""Model loading and access. `ModelHandle` is imported lazily: torch is heavy."""

from unlearnbench.models.checkpoint import CheckpointSpec, ResolvedCheckpoint, resolve

__all__ = ["CheckpointSpec", "ModelHandle", "ResolvedCheckpoint", "resolve"]


def __getattr__(name: str):
    if name == "ModelHandle":
        from unlearnbench.models.handle import ModelHandle

        return ModelHandle
    raise AttributeError(name)
