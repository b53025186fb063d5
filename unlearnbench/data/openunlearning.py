"""The convention option the tofu and muse loaders share (docs/suites/tofu.md),
its privleak settings and the reference system prompt.

`convention=spec` (the default) scores membership with `privleak_score`
(Min-K%++) at `mink_k`, counting the lowest ceil(k·n) tokens.
`convention=reference` follows OpenUnlearning's code path throughout
(`metrics/openunlearning.py`); its privleak is what OpenUnlearning's configs
compute (`configs/eval/{tofu,muse}_metrics/privleak.yaml` -> `mia_min_k`):
Min-K% at k = 0.4, counting int(k·n) tokens. `reference_system_prompt`
(reference convention only) states the system prompt of the OpenUnlearning
model config being matched: `auto` (that of OpenUnlearning's config for the
model's family, none where it has no config), `none`, or the text.
"""

from __future__ import annotations

from unlearnbench.errors import DataError
from unlearnbench.metrics.mia import SCORES
from unlearnbench.metrics.openunlearning import AUTO

CONVENTIONS = ("spec", "reference")
REFERENCE_PRIVLEAK = {"privleak_score": "mink", "mink_k": 0.4}
# The code `convention=reference` reproduces, and is tested against (docs/suites/tofu.md).
REFERENCE_CODE = "locuslab/open-unlearning@d3d7cf9"


def convention_params(params: dict, options: dict, source: object, suite: str) -> dict:
    """`params` checked, with the reference convention's privleak settings and
    the reference code it reproduces (`reference_code`) in place."""
    if params["convention"] not in CONVENTIONS:
        raise DataError(
            source,
            f"--suite-option {suite}.convention={params['convention']}: expected one of {', '.join(CONVENTIONS)}",
        )
    if params["reference_system_prompt"] != AUTO and params["convention"] != "reference":
        raise DataError(
            source,
            f"--suite-option {suite}.reference_system_prompt applies to convention=reference "
            f"only (the default convention uses the model's chat template as it is)",
        )
    if params["convention"] == "reference":
        clash = sorted(set(REFERENCE_PRIVLEAK) & set(options))
        if clash:
            raise DataError(
                source,
                f"--suite-option {suite}.convention=reference sets {' and '.join(clash)} itself "
                f"(OpenUnlearning's Min-K% at k = 0.4): drop {' and '.join(clash)}",
            )
        params = {**params, **REFERENCE_PRIVLEAK, "reference_code": REFERENCE_CODE}
    if params["privleak_score"] not in SCORES:
        raise DataError(source, f"privleak_score must be one of {', '.join(SCORES)}, not {params['privleak_score']!r}")
    return params


def floor_count(params: dict) -> bool:
    """Whether Min-K% counts int(k·n) tokens (OpenUnlearning) rather than ceil(k·n)."""
    return params["convention"] == "reference"
