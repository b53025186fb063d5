"""UDS's figure in the HTML report: the per-layer patching effect."""

from __future__ import annotations

from unlearnbench.report import svg


def layer_profiles(view) -> list[str]:
    profiles = {
        n: (p["delta1_mean"], p["delta2_mean"])
        for n in view.names
        if (p := (view.metric(n, "uds").get("details") or {}).get("layer_profile"))
    }
    if not profiles:
        return []
    return [
        svg.profiles(
            "UDS: per-layer patching effect",
            profiles,
            "uds-profile",
            "Mean drop of the full model's entity log-probability when a layer's hidden state is patched in: "
            "delta2 (the checkpoint's) close to delta1 (the retain model's) = knowledge erased at that layer.",
            names=("delta1: retain patched in", "delta2: checkpoint patched in"),
            unit="log-prob drop (nats)",
        )
    ]
