"""ConceptGuard: is the harmful use of a dual-use concept removed and its
benign use kept? Memorised text and answered queries, harmful vs benign,
scored by a judge."""

from unlearnbench.suites import UNIT, Metric, metric_set, on_zoo_family

# docs/suites/conceptguard.md defaults; `--suite-option conceptguard.KEY=VALUE` (and `--judge`) override them.
DEFAULT_PARAMS = {
    "prefix_tokens": 32,  # HarmMem / HelpRet prompt: the text's first tokens
    "max_new_tokens": 128,  # continuation and reply length
    "reference_tokens": 128,  # the rest of the text scored against, cut to this many tokens
    "judge": "reference",  # reference | hf:PATH | openai:URL (see metrics/judges.py)
    "judge_model": "",  # the model name sent to an openai: endpoint ("" = the server's default)
    "embedder": "all-MiniLM-L6-v2",  # the reference judge's embedding model
}
UTILITY = ("help_ret", "help_qa", "help_score", "judge_failure_rate")

SPEC = on_zoo_family(
    name="conceptguard",
    metrics=(
        *metric_set(("harm_mem", "help_ret", "harm_qa", "help_qa"), scale=UNIT, utility=UTILITY),
        Metric("harm_score"),
        Metric("help_score", utility=True),
        Metric("judge_failure_rate", scale=UNIT, utility=True),
        *metric_set(("ctxt_sep", "ctxt_sep_macro", "rouge_sep"), scale=(-1.0, 1.0), kind="set"),
    ),
    loader="unlearnbench.suites.conceptguard.data:load",
    evaluator="unlearnbench.suites.conceptguard.metrics:evaluate",
    zoo_data="unlearnbench.suites.conceptguard.zoo:write",
    version=4,  # 4: set-level metrics keep their bootstrap replicates (paired decisions)
    headline=(("forget", "ctxt_sep"), ("utility", "help_qa")),
    options=tuple(DEFAULT_PARAMS),
    flags=(
        (
            "--judge",
            "judge",
            "reference|hf:PATH|openai:URL",
            "ConceptGuard judge (default: reference, an offline embedding proxy)",
        ),
    ),
    plots="unlearnbench.suites.conceptguard.plots:separation_per_concept",
)
