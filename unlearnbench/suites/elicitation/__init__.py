"""Elicitation: is a forgotten fact gone however it is asked (other
wordings, fill in the blank, multiple choice, true or false, the reverse
relation, one hop, a few shots, a reminder, a role), and are the facts next
to it kept? (docs/suites/elicitation.md)"""

from unlearnbench.suites import UNIT, Metric, on_zoo_family
from unlearnbench.suites.elicitation.data import ASKED, FAMILIES

SPEC = on_zoo_family(
    name="elicitation",
    metrics=(
        *(Metric(f"forget_{family}", scale=UNIT) for family in FAMILIES),
        *(Metric(f"neighbour_{family}", scale=UNIT, utility=True) for family in ASKED),
        Metric("neighbour_all", scale=UNIT, utility=True),
    ),
    loader="unlearnbench.suites.elicitation.data:load",
    evaluator="unlearnbench.suites.elicitation.metrics:evaluate",
    version=1,
    headline=(("forget", "forget_paraphrase"), ("utility", "neighbour_all")),
    options=("max_new_tokens", "max_items", "scoring", "samples", "temperature"),  # data.DEFAULT_PARAMS' keys
    plots="unlearnbench.suites.elicitation.report:families",
    notes="unlearnbench.suites.elicitation.report:worst_family_lines",
    zoo_data="unlearnbench.suites.elicitation.zoo:write",
)
