"""Issue 58: `unlearnbench.api` is what a suite from another package is
written against. A suite written with it alone type-checks under mypy
--strict (and a wrong evaluator does not), runs on SmolLM2, and a spec whose
functions cannot be called the way the session calls them is one message
naming the suite and the function."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from unlearnbench.errors import UnlearnbenchError

REPOSITORY = Path(__file__).resolve().parents[2]

# A third-party suite: how likely does the model find the capital of each
# country? It imports unlearnbench.api and nothing else of unlearnbench.
CAPITALS = '''
"""A suite from another package, written against unlearnbench.api alone."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearnbench.api import (DataError, LanguageModel, Metric, MetricResult, References, SuiteSpec, Unavailable,
                              mean_result)


@dataclass(frozen=True)
class Capitals:
    questions: dict[str, tuple[str, str]]  # id -> (question, answer)
    fingerprint: str
    source: str
    params: dict[str, Any] = field(default_factory=dict)


def load(source: str | Path | None, options: dict[str, Any]) -> Capitals:
    if source is None:
        raise DataError("capitals", "no data: pass --data-dir capitals=DIR")
    path = Path(source) / "capitals.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return Capitals(questions={r["id"]: (r["question"], r["answer"]) for r in records},
                    fingerprint=hashlib.sha256(path.read_bytes()).hexdigest(), source=str(source))


def evaluate(model: LanguageModel, data: Capitals, refs: References | None = None
             ) -> Mapping[str, MetricResult | Unavailable]:
    ids = sorted(data.questions)
    scores = model.score_continuations([data.questions[i][0] for i in ids], [" " + data.questions[i][1] for i in ids])
    per_item = {i: float(s.logprobs.sum()) for i, s in zip(ids, scores)}
    return {"answer_logprob": mean_result("answer_logprob", per_item, higher_is_better=False)}


SPEC = SuiteSpec(name="capitals", metrics=(Metric("answer_logprob"),), loader=load, evaluator=evaluate, version=1)
'''
ROWS = [("fr", "What is the capital of France?", "Paris"), ("jp", "What is the capital of Japan?", "Tokyo"),
        ("it", "What is the capital of Italy?", "Rome")]


@pytest.fixture
def capitals(tmp_path):
    module_path = tmp_path / "capitals_suite.py"
    module_path.write_text(CAPITALS)
    data = tmp_path / "data"
    data.mkdir()
    (data / "capitals.jsonl").write_text("".join(
        f'{{"id": "{i}", "question": "{q}", "answer": "{a}"}}\n' for i, q, a in ROWS))
    return module_path, data


def _mypy(path: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                           "--ignore-missing-imports", "--cache-dir", str(cache), str(path)],
                          capture_output=True, text=True, cwd=REPOSITORY)


def test_a_suite_written_against_the_api_type_checks_and_a_wrong_one_does_not(capitals, tmp_path):
    pytest.importorskip("mypy", reason="mypy is a dev dependency (pip install -e '.[dev]')")
    module_path, _ = capitals
    assert "from unlearnbench." not in CAPITALS.replace("from unlearnbench.api import", "")
    checked = _mypy(module_path, tmp_path / "mypy")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # An evaluator that returns a list, and one that takes no data: the spec no longer type-checks.
    for wrong in ('    return [mean_result("answer_logprob", per_item, higher_is_better=False)]',
                  "def evaluate(model: LanguageModel) -> Mapping[str, MetricResult | Unavailable]:\n    return {}"):
        bad = tmp_path / "bad" / "capitals_suite.py"
        bad.parent.mkdir(exist_ok=True)
        source = CAPITALS.replace(
            '    return {"answer_logprob": mean_result("answer_logprob", per_item, higher_is_better=False)}', wrong
        ) if wrong.startswith("    return") else CAPITALS.split("def evaluate(")[0] + wrong + "\n\n\n" + \
            "SPEC" + CAPITALS.split("\nSPEC", 1)[1]
        bad.write_text(source)
        result = _mypy(bad, tmp_path / "mypy")
        assert result.returncode == 1 and "capitals_suite.py" in result.stdout, result.stdout


def test_the_suite_runs_on_smollm2_through_its_spec(capitals, smollm2, monkeypatch):
    from unlearnbench.api import MetricResult, References

    module_path, data_dir = capitals
    spec_of = importlib.util.spec_from_file_location("capitals_suite", module_path)
    module = importlib.util.module_from_spec(spec_of)
    monkeypatch.setitem(sys.modules, "capitals_suite", module)  # dataclasses look their module up
    spec_of.loader.exec_module(module)
    spec = module.SPEC
    spec.check_functions()
    data = spec.load_data(str(data_dir), {})
    result = spec.evaluate(smollm2, data, References())["answer_logprob"]
    assert isinstance(result, MetricResult) and result.n == len(ROWS)
    # The value is the mean of each answer's summed log-probability, as the model scores it directly.
    direct = [float(s.logprobs.sum()) for s in smollm2.score_continuations([q for _, q, _ in ROWS],
                                                                           [" " + a for _, _, a in ROWS])]
    assert math.isclose(result.value, sum(direct) / len(direct), rel_tol=1e-6)
    assert result.value < 0


def _spec(**functions):
    from unlearnbench.api import SuiteSpec

    defaults = {"loader": lambda source, options: None, "evaluator": lambda model, data, refs: {}}
    return SuiteSpec(name="probe", metrics=("m",), version=1, **{**defaults, **functions})


@pytest.mark.parametrize("functions, message", [
    ({"loader": "no_such_module:load"}, "suite probe: loader: cannot import no_such_module:load (ModuleNotFoundError"),
    ({"evaluator": "json:no_such_function"}, "suite probe: evaluator: cannot import json:no_such_function (AttributeError"),
    ({"evaluator": "json:__doc__"}, "is a str, not a function"),
    ({"evaluator": lambda model: {}}, "is called as f(model, data, refs), which its signature (model)"),
    ({"plots": lambda view, extra: []}, "suite probe: plots (test_api:<lambda>): it is called as f(view), which its signature (view, extra)"),
])
def test_a_function_that_cannot_be_called_as_the_session_calls_it_is_one_message(functions, message):
    spec = _spec(**functions)
    with pytest.raises(UnlearnbenchError) as raised:
        spec.check_functions()
    assert message in str(raised.value)


def test_a_reference_that_is_not_module_colon_function_is_refused_when_the_spec_is_built():
    with pytest.raises(UnlearnbenchError, match=r"suite probe: loader: 'json\.loads' is not a 'module:function'"):
        _spec(loader="json.loads")


def test_a_loader_whose_data_lacks_what_the_session_reads_is_named(tmp_path):
    class Texts:  # fingerprint and source, no params
        fingerprint, source = "f", "s"

    spec = _spec(loader=lambda source, options: Texts())
    with pytest.raises(UnlearnbenchError, match=r"suite probe: its loader .* returned a Texts without params"):
        spec.load_data(str(tmp_path), {})


def test_the_api_names_what_it_exports():
    import unlearnbench.api as api

    assert sorted(api.__all__) == sorted(set(api.__all__))
    assert all(hasattr(api, name) for name in api.__all__)
    assert {"SuiteSpec", "Metric", "LanguageModel", "MetricResult", "Unavailable", "References", "SuiteData",
            "Loader", "Evaluator", "Probe", "mean_result"} <= set(api.__all__)
    # Importing it loads no torch: a suite's spec module imports it at registration.
    code = "import sys, unlearnbench.api; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_every_built_in_suite_function_is_annotated_with_the_api_types():
    """Each built-in evaluator takes a `LanguageModel` and a typed data class."""
    import inspect
    import typing

    from unlearnbench.api import LanguageModel
    from unlearnbench.suites import SUITES

    for name, spec in SUITES.items():
        hints = typing.get_type_hints(spec.evaluate)
        assert hints["model"] is LanguageModel, name
        assert inspect.isclass(hints["data"]) and hints["data"].__name__.lower().startswith(name[:3]), (name, hints)
        for probe in spec.probes:
            assert typing.get_type_hints(probe.function.resolve())["model"] is LanguageModel, probe.name
