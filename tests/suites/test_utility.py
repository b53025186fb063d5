"""The utility suite and its lm-eval adapter (issue 28, docs/suites/utility.md): lm-eval's
own tasks run through our `LM` adapter and through lm-eval's HF backend on
SmolLM2 give the same log-likelihoods, rolling log-likelihoods, generations
and accuracies; the same through the endpoint backend against a loopback
server; bad input is one line before any model loads; and the gate separates
retain from ga on a task over the zoo's facts."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from unlearnbench.errors import DataError, ThresholdsError

lm_eval = pytest.importorskip("lm_eval", reason="pip install 'unlearnbench[lmeval]' (the dev extra installs it)")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from lm_eval import simple_evaluate  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from unlearnbench.suites.utility import data as utility_data  # noqa: E402
from unlearnbench.suites.utility.lm_adapter import UnlearnbenchLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# Written for this test.
DOCS = [
    {"question": "Which organ pumps blood?", "choices": ["Liver", "Heart", "Lung", "Kidney"], "answer": 1,
     "text": "The heart pumps blood through the body. It has four chambers and beats about seventy times a minute."},
    {"question": "What is the chemical formula of water?", "choices": ["H2O", "CO2", "NaCl", "O2"], "answer": 0,
     "text": "Water is made of hydrogen and oxygen. At sea level it boils at one hundred degrees Celsius."},
    {"question": "Which planet is known as the red planet?", "choices": ["Venus", "Jupiter", "Mars", "Saturn"],
     "answer": 2, "text": "Mars looks red because of iron oxide on its surface."},
    {"question": "How many legs does a spider have?", "choices": ["Six", "Four", "Ten", "Eight"], "answer": 3,
     "text": "Spiders have eight legs and most of them spin silk."},
]
TASKS = {
    # multiple_choice -> loglikelihood, with an empty-context-free cloze prompt; acc and acc_norm
    "local_mc": """task: local_mc
dataset_path: json
dataset_kwargs: {{data_files: {{test: {file}}}}}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list: [{{metric: acc}}, {{metric: acc_norm}}]
""",
    # a context that ends in a space (lm-eval moves it into the continuation) and no target delimiter
    "local_mc_space": """task: local_mc_space
dataset_path: json
dataset_kwargs: {{data_files: {{test: {file}}}}}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer: "
target_delimiter: ""
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list: [{{metric: acc}}]
""",
    # loglikelihood_rolling (perplexity)
    "local_roll": """task: local_roll
dataset_path: json
dataset_kwargs: {{data_files: {{test: {file}}}}}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list: [{{metric: word_perplexity}}, {{metric: byte_perplexity}}, {{metric: bits_per_byte}}]
""",
    # generate_until, greedy, stop strings
    "local_gen": """task: local_gen
dataset_path: json
dataset_kwargs: {{data_files: {{test: {file}}}}}
test_split: test
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{choices[answer]}}}}"
generation_kwargs: {{until: ["\\n", "Question:"], max_gen_toks: 16, do_sample: false}}
metric_list: [{{metric: exact_match}}]
""",
}


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm-eval-tasks")
    data = folder / "docs.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    for name, text in TASKS.items():
        (folder / f"{name}.yaml").write_text(text.format(file=data))
    return folder


def evaluate(lm, task_dir, tasks=tuple(TASKS)) -> dict:
    manager = TaskManager(include_path=str(task_dir), include_defaults=False)  # the local tasks only: indexing
    # lm-eval's own thousands of task files takes seconds each time
    return simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager, log_samples=True, bootstrap_iters=0)


def responses(output: dict, task: str) -> list:
    return [s["resps"] for s in sorted(output["samples"][task], key=lambda s: s["doc_id"])]


@pytest.fixture(scope="module")
def lm_eval_hf(smollm2_dir, task_dir, reference_results):
    """lm-eval's own HF backend on SmolLM2, every task: per task its results and
    its samples' doc ids, arguments and responses (kept per machine: tests/reference_results.py)."""
    def run() -> dict:
        from lm_eval.models.huggingface import HFLM

        output = evaluate(HFLM(pretrained=str(smollm2_dir), device="cpu", batch_size=4, dtype="float32"), task_dir)
        return {"results": output["results"],
                "samples": {task: [{key: s[key] for key in ("doc_id", "arguments", "resps")} for s in samples]
                            for task, samples in output["samples"].items()}}

    return reference_results.get("lm-eval-hf-utility", run, code=[evaluate], inputs=(DOCS, TASKS),
                                 models=[smollm2_dir])


def assert_same_results(ours: dict, theirs: dict, tasks, *, greedy: bool = True) -> None:
    """Per document the same responses; `greedy=False`: a backend without argmaxes reports no is_greedy."""
    for task in tasks:
        for a, b in zip(responses(ours, task), responses(theirs, task), strict=True):
            if task == "local_gen":
                assert a == b
            elif task == "local_roll":
                np.testing.assert_allclose(a[0][0], b[0][0], atol=1e-3)  # a sum over ~20 tokens
            else:
                np.testing.assert_allclose([r[0][0] for r in a], [r[0][0] for r in b], atol=1e-4)
                assert [r[0][1] for r in a] == ([r[0][1] for r in b] if greedy else [False] * len(b))
        for metric in ("acc,none", "acc_norm,none", "exact_match,none"):
            if metric in theirs["results"][task]:
                assert ours["results"][task][metric] == theirs["results"][task][metric]
        if task == "local_roll":
            assert ours["results"][task]["word_perplexity,none"] == pytest.approx(
                theirs["results"][task]["word_perplexity,none"], rel=1e-4)


@pytest.mark.real_model
def test_the_adapter_gives_lm_evals_hf_backend_results_on_smollm2(smollm2, task_dir, lm_eval_hf):
    # local_mc_space asks with a context that ends in a space: the whitespace rule is exercised.
    context, continuation = lm_eval_hf["samples"]["local_mc_space"][0]["arguments"][0]
    assert context.endswith("Answer: ") and not continuation.startswith(" ")
    assert_same_results(evaluate(UnlearnbenchLM(smollm2), task_dir), lm_eval_hf, TASKS)


@pytest.mark.real_model
def test_the_adapter_over_the_endpoint_backend_gives_the_same(smollm2_dir, task_dir, lm_eval_hf):
    from openai_server import CompletionsServer

    from unlearnbench.backends import LoadSettings, backend_for

    server = CompletionsServer(smollm2_dir, "smollm2")
    try:
        source = f"openai:{server.url}#smollm2"
        remote = backend_for(source).load_model(source, name="smollm2", settings=LoadSettings(
            device="cpu", tokenizers={"smollm2": str(smollm2_dir)}))
        # An endpoint reports the log-probs of the tokens it is sent, not the argmax: is_greedy is False.
        tasks = ("local_mc", "local_mc_space", "local_gen")
        assert_same_results(evaluate(UnlearnbenchLM(remote), task_dir, tasks), lm_eval_hf, tasks, greedy=False)
    finally:
        server.close()


def test_the_adapter_is_in_lm_evals_registry_and_loads_through_our_backends(smoke_lm_dir):
    from lm_eval.api.registry import get_model

    assert get_model("unlearnbench") is UnlearnbenchLM
    lm = UnlearnbenchLM.create_from_arg_string(f"pretrained={smoke_lm_dir},device=cpu")
    assert lm.model.name == str(smoke_lm_dir) and lm.model.context_length > 0
    with pytest.raises(ValueError, match="unlearnbench's models generate greedily"):
        from lm_eval.api.instance import Instance

        lm.generate_until([Instance("generate_until", {}, ("Q", {"do_sample": True, "temperature": 0.7}), 0)])


# ---------------------------------------------------------------- the task index
# A user's folder beside lm-eval's own tasks: a group over a built-in task, a
# built-in with overrides and a local task, and a local task named as a
# built-in (lm-eval indexes include_path last: the user's definition wins).
USER_TASKS = {
    "my_group.yaml": "group: my_group\ntask: [arc_easy, {task: hellaswag, num_fewshot: 3}, my_local]\n",
    "my_local.yaml": "task: my_local\ndataset_path: my/data\ntest_split: test\noutput_type: multiple_choice\n"
                     "doc_to_text: q\ndoc_to_choice: [a, b]\ndoc_to_target: 0\n",
    "piqa.yaml": "task: piqa\ndataset_path: my/piqa\ntest_split: test\noutput_type: multiple_choice\n"
                 "doc_to_text: q\ndoc_to_choice: [a, b]\ndoc_to_target: 0\n",
}
INDEX_QUERIES = (("mmlu",), ("wmdp", "ai2_arc"), ("my_group", "piqa"), ("mmlu_stem", "hellaswag"))


def index_entries(index: dict, names, include: Path) -> dict:
    """{name: (kind, file, config, tags)} of `names` and all they reach in a
    TaskManager's index (a group's tasks, a tag's tasks), files relative to
    lm-eval's tasks folder or the user's folder."""
    import lm_eval.tasks

    builtin = Path(lm_eval.tasks.__file__).resolve().parent
    out, pending = {}, list(names)
    while pending:
        name = pending.pop()
        if name in out or name not in index:
            continue
        entry = index[name]
        path = Path(entry.yaml_path).resolve() if entry.yaml_path else None
        where = None if path is None else (f"lm-eval:{path.relative_to(builtin)}" if path.is_relative_to(builtin)
                                           else f"user:{path.relative_to(include.resolve())}")
        # Unresolved `!function` paths name the folder lm-eval is installed in: written relative, as the files.
        config = json.loads(json.dumps(entry.cfg, default=str).replace(str(builtin), "lm-eval:")
                            .replace(str(include.resolve()), "user:")) if entry.cfg is not None else None
        out[name] = (entry.kind.name, where, config, sorted(entry.tags))
        if entry.kind.name == "GROUP":
            pending += [t if isinstance(t, str) else t["task"] for t in entry.cfg["task"]]
        elif entry.kind.name == "TAG":
            pending += sorted(entry.tags)
    return out


@pytest.fixture
def user_tasks(tmp_path):
    for name, text in USER_TASKS.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_the_task_index_gives_the_definitions_lm_evals_full_index_gives(user_tasks, reference_results):
    """Each query's TaskManager indexes a few folders, not lm-eval's ~14,000
    task files, and holds every definition the query reaches as lm-eval's own
    full TaskManager(include_path=...) does (kept per machine)."""
    from unlearnbench.suites.utility.task_index import task_manager

    def lm_evals_own() -> dict:
        index = TaskManager(include_path=str(user_tasks)).task_index
        return {query: index_entries(index, query, user_tasks) for query in INDEX_QUERIES}

    theirs = reference_results.get("lm-eval-task-index", lm_evals_own, code=[index_entries], inputs=(
        USER_TASKS, INDEX_QUERIES))
    for query in INDEX_QUERIES:
        manager = task_manager(str(user_tasks), query)
        assert len(manager.task_index) < 200, (query, len(manager.task_index))  # not the full index
        assert index_entries(manager.task_index, query, user_tasks) == theirs[query], query
    assert theirs[("my_group", "piqa")]["piqa"][1] == "user:piqa.yaml"
    assert {"arc_easy", "hellaswag", "my_local"} <= set(theirs[("my_group", "piqa")])
    assert len(theirs[("mmlu",)]) > 50  # groups, tags and the 57 subjects


@pytest.fixture
def fresh_task_index():
    """The task index module with its per-process memos emptied before and after."""
    from unlearnbench.suites.utility import task_index

    memos = (task_index.builtin_index, task_index._user_index, task_index.task_manager)
    for memo in memos:
        memo.cache_clear()
    yield task_index
    for memo in memos:
        memo.cache_clear()


def test_the_builtin_index_is_built_once_per_installation_and_read_back(fresh_task_index, monkeypatch, tmp_path):
    from lm_eval.tasks._index import Entry, Kind

    monkeypatch.setattr("unlearnbench.cache.DEFAULT_CACHE_DIR", tmp_path / "cache")
    root = fresh_task_index._builtin_root()
    builds = []

    class OneTask:  # lm-eval's TaskManager, counted, with a one-entry index
        def __init__(self, **kwargs):
            builds.append(kwargs)
            self.task_index = {"t": Entry("t", Kind.TASK, root / "arc" / "arc_easy.yaml", {"task": "t"})}

    monkeypatch.setattr("lm_eval.tasks.TaskManager", OneTask)
    assert fresh_task_index.builtin_index(root) == {"t": ["TASK", "arc/arc_easy.yaml", []]}
    fresh_task_index.builtin_index.cache_clear()  # another process
    assert fresh_task_index.known_tasks("") == {"t"} and len(builds) == 1
    assert len(list((tmp_path / "cache" / "lm-eval-tasks").glob("*.json"))) == 1


def test_the_task_files_key_the_index(tmp_path):
    from unlearnbench.suites.utility.task_index import _files_digest

    (tmp_path / "a").mkdir()
    task = tmp_path / "a" / "t.yaml"
    task.write_text("task: t\n")
    first = _files_digest(tmp_path)
    (tmp_path / "notes.md").write_text("not a task file")
    assert _files_digest(tmp_path) == first
    task.write_text("task: t2\n")
    assert _files_digest(tmp_path) != first


def test_an_index_that_does_not_match_the_files_falls_back_to_lm_evals_full_index(fresh_task_index, monkeypatch):
    """A stale index (hellaswag said to be defined in piqa's file) is caught by
    the check of every reached definition: the run gets lm-eval's own full TaskManager."""
    root = fresh_task_index._builtin_root()
    index = dict(fresh_task_index.builtin_index(root))
    index["hellaswag"] = ["TASK", "piqa/piqa.yaml", []]
    monkeypatch.setattr(fresh_task_index, "builtin_index", lambda _root: index)
    made = []

    class Recorded:  # lm-eval's TaskManager, recorded; the full one is not built (seconds)
        def __init__(self, include_path=None, include_defaults=True):
            made.append((include_path, include_defaults))
            self.task_index = {} if include_defaults else TaskManager(include_path=include_path,
                                                                       include_defaults=False).task_index

    monkeypatch.setattr("lm_eval.tasks.TaskManager", Recorded)
    assert isinstance(fresh_task_index.task_manager("", ("arc_easy",)), Recorded)
    assert made[-1][1] is False  # the index matches for arc_easy: a few folders
    fresh_task_index.task_manager("", ("hellaswag",))
    assert made[-1] == (None, True)  # lm-eval's full TaskManager


def test_a_tag_over_many_folders_gets_lm_evals_full_index_without_a_warning(fresh_task_index, monkeypatch, caplog):
    """`multiple_choice` tags tasks in hundreds of folders: indexed folder by
    folder, each would replace the tag (and log it), so lm-eval's full index is
    used straight away."""
    made = []

    class Recorded:
        def __init__(self, include_path=None, include_defaults=True):
            made.append((include_path, include_defaults))
            self.task_index = {}

    monkeypatch.setattr("lm_eval.tasks.TaskManager", Recorded)
    with caplog.at_level("WARNING"):
        fresh_task_index.task_manager("", ("multiple_choice",))
    assert made == [(None, True)] and not caplog.records


# ---------------------------------------------------------------- bad input
def test_an_unknown_task_is_one_line_with_the_nearest_names(task_dir):
    with pytest.raises(DataError) as error:
        utility_data.load(None, {"include_path": str(task_dir)}, ("local_mcq.acc",))
    assert "\n" not in str(error.value) and "unknown lm-eval task 'local_mcq' (did you mean local_mc" in str(error.value)
    with pytest.raises(DataError, match="no lm-eval task"):
        utility_data.load(None, {}, ())


def test_a_gate_metric_that_names_no_task_is_refused_at_start_up(tmp_path):
    from unlearnbench.suites import SUITES
    from unlearnbench.thresholds import load_suite_thresholds

    path = tmp_path / "utility.yaml"
    path.write_text("suite: utility\nchecks:\n  kept:\n    metric: mmlu\n    direction: at_least\n    bound: 0.3\n"
                    "    rationale: r\n")
    with pytest.raises(ThresholdsError, match=r"check 'kept': metric 'mmlu': a utility metric is '<lm-eval task>"):
        load_suite_thresholds(path, "utility", SUITES["utility"].known_metrics)
    assert load_suite_thresholds(ROOT / "thresholds" / "utility.yaml", "utility", SUITES["utility"].known_metrics)


def zoo_task(folder: Path, cache_dir) -> Path:
    """An lm-eval task over the zoo's retain facts (the WMDP-format set's MMLU side), cloze form."""
    from unlearnbench.fixtures import zoo

    facts = zoo.data_dir(cache_dir) / "wmdp" / "mmlu" / "biographies_1.jsonl"
    (folder / "zoo_facts.yaml").write_text(
        f"task: zoo_facts\ndataset_path: json\ndataset_kwargs: {{data_files: {{test: {facts}}}}}\ntest_split: test\n"
        "output_type: multiple_choice\ndoc_to_text: \"Question: {{question}}\\nAnswer:\"\n"
        "doc_to_choice: \"{{choices}}\"\ndoc_to_target: answer\nmetric_list: [{metric: acc}]\n")
    (folder / "utility.yaml").write_text(
        "suite: utility\nchecks:\n  facts_kept:\n    axis: utility\n    metric: zoo_facts.acc\n"
        "    direction: at_least\n    relative_to: full\n    margin: 0.05\n    rationale: the zoo's retain facts\n")
    return folder


def bench(folder: Path, cache_dir, zoo_family, models=("retain", "ga")):
    from unlearnbench.models.checkpoint import CheckpointSpec
    from unlearnbench.session import Bench, BenchOptions

    specs = [CheckpointSpec(name=n, source=str(zoo_family[n])) for n in models]
    run = Bench(BenchOptions(models=specs, full=CheckpointSpec(name="full", source=str(zoo_family["full"])),
                             cache_dir=cache_dir, device="cpu",
                             suite_options={"utility": {"include_path": str(folder)}}))
    run.prepare_suites(["utility"], {"utility": folder / "utility.yaml"})
    return run, specs


def test_the_gate_keeps_retain_and_fails_ga_on_a_task_over_the_zoos_facts(tmp_path, cache_dir, zoo_family):
    run, specs = bench(zoo_task(tmp_path, cache_dir), cache_dir, zoo_family)
    verdicts = {spec.name: run.judge(spec, "utility", "facts_kept")[0] for spec in specs}
    assert verdicts["retain"].outcome == "pass" and verdicts["ga"].outcome == "fail", verdicts
    lost = run.run(specs[1], "utility").metrics["zoo_facts.acc"]
    values = np.array(list(lost.per_item.values()))
    assert lost.n == 128 and len(values) == 128 and lost.value == pytest.approx(values.mean())
    # lm-eval's stderr of a mean is the sample standard deviation over sqrt(n), kept as lm-eval reports it; the
    # CI a run shows is the one its checks decide by: accuracy is a share of 0/1 items, Wilson's interval.
    from statsmodels.stats.proportion import proportion_confint

    stderr = values.std(ddof=1) / np.sqrt(len(values))
    assert lost.params["stderr"] == pytest.approx(stderr)
    assert lost.interval == "wilson"
    assert lost.ci == pytest.approx(proportion_confint(int(values.sum()), len(values), method="wilson"))


def test_without_lm_eval_the_suite_is_unavailable_and_loads_no_model(tmp_path, cache_dir, zoo_family, monkeypatch):
    folder = zoo_task(tmp_path, cache_dir)
    monkeypatch.setitem(sys.modules, "lm_eval.tasks", None)  # `from lm_eval.tasks import ...` raises ImportError
    run, specs = bench(folder, cache_dir, zoo_family, models=("retain",))
    verdict, _ = run.judge(specs[0], "utility", "facts_kept")
    assert verdict.outcome == "skip" and "pip install 'unlearnbench[lmeval]'" in verdict.reason
    assert run.models.held == {}  # nothing loaded: neither the checkpoint nor the full model
