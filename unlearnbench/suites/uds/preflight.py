"""UDS's check before any weights load: activation patching moves hidden
states between models, so every model must share the full model's
tokenizer. Read from the tokenizer files (a GGUF file or an endpoint has
none to read: those are checked when the models run)."""

from __future__ import annotations

from unlearnbench.errors import CheckpointError


def one_tokenizer(run, suite: str) -> dict[str, str]:
    """{checkpoint: why UDS cannot run on it} for the checkpoints whose
    tokenizer differs from the full model's; a retain model that differs
    stops the run (stage 1 patches it into the full model)."""
    from unlearnbench.models.checkpoint import tokenizer_signature

    full = run.reference_spec("full", suite)
    expected = full and tokenizer_signature(run.spec_path(full))
    if expected is None:
        return {}  # no full model (UDS is unavailable) or no tokenizer files to compare
    retain = run.reference_spec("retain", suite)
    if retain is not None and tokenizer_signature(run.spec_path(retain)) not in (None, expected):
        raise CheckpointError(
            retain.source,
            f"--retain-model: its tokenizer differs from the full model's "
            f"({full.source}); UDS patches activations between them and needs one tokenizer",
        )
    return {
        spec.name: f"its tokenizer differs from the full model's ({full.source}): activation patching needs "
        "one tokenizer, so UDS cannot be computed for it"
        for spec in run.checkpoints(suite)
        if tokenizer_signature(run.spec_path(spec)) not in (None, expected)
    }
