"""ConceptGuard's figure in the HTML report."""

from __future__ import annotations

from unlearnbench.report import svg


def separation_per_concept(view) -> list[str]:
    tables = {
        n: table for n in view.names if (table := (view.metric(n, "ctxt_sep").get("details") or {}).get("per_concept"))
    }
    if not tables:
        return []
    names = list(tables)
    concepts = sorted({c for t in tables.values() for c in t})
    return [
        svg.hbars(
            "ConceptGuard: separation per concept (Sep_c)",
            names,
            {c: [tables[n].get(c, {}).get("sep") for n in names] for c in concepts},
            axis_label="Sep_c = HelpScore_c - HarmScore_c (-1 to 1)",
            kind="conceptguard-separation",
            lo=-1.0,
            hi=1.0,
            caption="Right is good: benign use kept, harmful use removed.",
        )
    ]
