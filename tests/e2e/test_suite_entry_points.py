"""Issue 15: a suite from another package, registered through the
`unlearnbench.suites` entry-point group, runs like a built-in one; so does a
backend registered through `unlearnbench.backends`.

The package is built and installed (pip, offline, into a temporary folder put
on PYTHONPATH) by the test; the suite's test module and thresholds YAML live
in the project, as ours do. Files a new suite needs: its package module (spec,
loader, evaluator) and its registration, the test module's one marker line,
and the YAML. A new backend: its module (the Backend and its functions) and
its registration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = '''
"""A third-party unlearnbench suite: how fluent is the model on a few plain texts?"""
from dataclasses import dataclass

from unlearnbench.backends import Backend
from unlearnbench.suites import SuiteSpec

SPEC = SuiteSpec(name="fluency", metrics=("text_logprob",), loader="ub_fluency:load",
                 evaluator="ub_fluency:evaluate", version=1, defaults="ub_fluency")


@dataclass(frozen=True)
class Texts:
    texts: dict
    fingerprint: str
    source: str
    params: dict


def load(source, options):
    from unlearnbench.suites.smoke.data import load as smoke_texts

    data = smoke_texts(source)
    return Texts(texts=data.texts, fingerprint=data.fingerprint, source=data.source, params={})


def evaluate(handle, data, refs=None):
    from unlearnbench.metrics.core import mean_result

    ids = list(data.texts)
    scores = handle.score_continuations([""] * len(ids), [data.texts[i] for i in ids])
    result = mean_result("text_logprob", {i: float(s.logprobs.mean()) for i, s in zip(ids, scores)},
                         higher_is_better=True)
    return {"text_logprob": result}


# A backend serving `mirror:PATH`: the Hugging Face weights at PATH, reached
# through a prefix of its own (a real one would talk to its own runtime).
def load_mirror(source, *, name, settings):
    from unlearnbench.models.handle import load_backend

    return load_backend(source.removeprefix("mirror:"), name=name, settings=settings)


def check_mirror(source, *, name, settings):
    from unlearnbench.models.checkpoint import check_source

    check_source(source.removeprefix("mirror:"), name=name, settings=settings)


def fingerprint_mirror(source, *, name, settings):
    from unlearnbench.models.checkpoint import source_fingerprint

    return source_fingerprint(source.removeprefix("mirror:"), name=name, settings=settings)


BACKEND = Backend("mirror", load="ub_fluency:load_mirror", check="ub_fluency:check_mirror",
                  fingerprint="ub_fluency:fingerprint_mirror")
'''

GATE = '''suite: fluency
checks:
  fluent_on_plain_texts:
    metric: text_logprob
    direction: at_least
    bound: -4.0
    rationale: a trained model puts far more than uniform mass on plain texts
'''


TEST_MODULE = 'import pytest\n\npytestmark = pytest.mark.unlearnbench("fluency")\n'


def install(tmp_path: Path, name: str, module: str, entry_points: dict[str, dict[str, str]]) -> Path:
    """Build and install a package (no index, no build isolation) into a
    folder of its own; returns the folder to put on PYTHONPATH. The package
    ships the suite's defaults (its gate and test module) as package data."""
    source = tmp_path / f"{name}-src"
    (source / "ub_fluency" / "defaults" / "suites" / "fluency").mkdir(parents=True)
    (source / "ub_fluency" / "defaults" / "thresholds").mkdir()
    (source / "ub_fluency" / "__init__.py").write_text(module)
    (source / "ub_fluency" / "defaults" / "thresholds" / "fluency.yaml").write_text(GATE)
    (source / "ub_fluency" / "defaults" / "suites" / "fluency" / "test_fluency.py").write_text(TEST_MODULE)
    points = "\n".join(f'[project.entry-points."{group}"]\n' + "\n".join(f'{k} = "{v}"' for k, v in named.items())
                       for group, named in entry_points.items())
    (source / "pyproject.toml").write_text(textwrap.dedent(f'''\
        [build-system]
        requires = ["setuptools>=68"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{name}"
        version = "0.1"

        [tool.setuptools]
        packages = ["ub_fluency"]

        [tool.setuptools.package-data]
        ub_fluency = ["defaults/thresholds/*.yaml", "defaults/suites/*/*.py"]

        ''') + points + "\n")
    target = tmp_path / f"{name}-site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", "--target", str(target), str(source)], check=True, capture_output=True)
    return target


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "suites" / "fluency").mkdir(parents=True)
    (root / "suites" / "fluency" / "test_fluency.py").write_text(TEST_MODULE)
    (root / "thresholds").mkdir()
    (root / "thresholds" / "fluency.yaml").write_text(GATE)
    return root


def run(python, project: Path, site: Path, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    return python.run(["-m", "pytest", "suites/fluency", "-p", "no:cacheprovider", "-v", *args], cwd=project, env=env)


def test_an_installed_third_party_suite_runs_and_its_gate_separates(project, tmp_path, cache_dir, smoke_lm_dir,
                                                                  smoke_untrained_dir, warm_python):
    site = install(tmp_path, "unlearnbench-fluency", PACKAGE, {"unlearnbench.suites": {"fluency": "ub_fluency:SPEC"},
                                                               "unlearnbench.backends": {"mirror": "ub_fluency:BACKEND"}})
    # The trained model through the package's backend, the untrained one through ours.
    result = run(warm_python, project, site, "--model", f"lm=mirror:{smoke_lm_dir}", "--model", f"untrained={smoke_untrained_dir}",
                 "--cache-dir", str(cache_dir), "--report-dir", str(tmp_path / "reports"))
    assert "test_fluent_on_plain_texts[lm] PASSED" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    assert "test_fluent_on_plain_texts[untrained] FAILED" in result.stdout
    assert result.returncode == 1


def test_init_writes_a_third_party_suites_own_defaults_and_they_run(tmp_path, cache_dir, smoke_lm_dir, warm_python):
    """Issue 44: a suite's package ships its gate and test module; `unlearnbench init` writes them
    into a repository, which then runs the suite by that gate."""
    site = install(tmp_path, "unlearnbench-fluency", PACKAGE, {"unlearnbench.suites": {"fluency": "ub_fluency:SPEC"},
                                                               "unlearnbench.backends": {"mirror": "ub_fluency:BACKEND"}})
    repo = tmp_path / "repo"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    made = warm_python.run(["-m", "unlearnbench.cli", "init", str(repo), "--suite", "fluency"], cwd=tmp_path, env=env)
    assert made.returncode == 0, made.stderr
    assert (repo / "thresholds" / "fluency.yaml").read_text() == GATE
    assert (repo / "suites" / "fluency" / "test_fluency.py").read_text() == TEST_MODULE
    result = run(warm_python, repo, site, f"--model=lm={smoke_lm_dir}", f"--cache-dir={cache_dir}")
    assert "test_fluent_on_plain_texts[lm] PASSED" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]


def test_a_broken_suite_entry_point_is_one_line_naming_the_package(project, tmp_path, smoke_lm_dir, warm_python):
    module = "SPEC = 'not a suite spec'\n"
    site = install(tmp_path, "unlearnbench-broken", module, {"unlearnbench.suites": {"fluency": "ub_fluency:SPEC"}})
    result = run(warm_python, project, site, "--model", str(smoke_lm_dir))
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: suite entry point fluency = 'ub_fluency:SPEC' (package unlearnbench-broken): expected a "
            "unlearnbench.suites.SuiteSpec, got str") in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    module = "BACKEND = 'not a backend'\n"
    site = install(tmp_path, "unlearnbench-badbackend", module, {"unlearnbench.backends": {"x": "ub_fluency:BACKEND"}})
    result = run(warm_python, project, site, "--model", str(smoke_lm_dir))
    assert result.returncode == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: backend entry point x = 'ub_fluency:BACKEND' (package unlearnbench-badbackend): expected a "
            "unlearnbench.backends.Backend, got str") in result.stderr
