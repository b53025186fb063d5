"""The smoke suite: is the harness wired up? A trained fixture passes, an
untrained one fails (mean token log-prob on a few texts, ROUGE-L recall of
greedy answers to trivial questions)."""

from unlearnbench.suites import UNIT, Metric, SuiteSpec

SPEC = SuiteSpec(
    name="smoke",
    metrics=(Metric("mean_token_logprob", utility=True), Metric("qa_rougeL_recall", utility=True, scale=UNIT)),
    loader="unlearnbench.suites.smoke.data:load",
    evaluator="unlearnbench.suites.smoke.metrics:evaluate",
    version=1,
    default_checkpoints=("smoke-lm", "smoke-untrained"),
)
