"""Issue 14: the release-gate recipes in examples/ci run as written.

Every `run:` (GitHub Actions) and `script:`/`after_script:` (GitLab CI)
command is executed in order, with the job's own rules for what runs after a
failed step, on the fixture zoo: the recipe's checkpoint paths are replaced
by zoo checkpoints and its baseline by the report of a "released" zoo model.
The install step is the only one not executed: it must be `bash
scripts/bootstrap.sh`, the very command that set up the environment running
these tests (.ci/run), and running it again would reach the package index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow  # the CI recipes, run as a CI job runs them

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "ci"
INSTALL = "bash scripts/bootstrap.sh"
# One suite keeps the test to a minute; the recipe's default is every suite.
SUITES = "suites/dusk"


def github_steps() -> tuple[dict, list[tuple[str, bool]]]:
    """(env, [(shell command, runs even after a failure)]) of the gate job."""
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    [job] = workflow["jobs"].values()
    steps = [(s["run"], str(s.get("if", "")).strip() == "always()") for s in job["steps"] if "run" in s]
    return dict(workflow["env"]), steps


def gitlab_steps() -> tuple[dict, list[tuple[str, bool]]]:
    config = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    job = config["unlearning-gate"]
    steps = ([(c, False) for c in job["before_script"]] + [(c, False) for c in job["script"]]
             + [(c, True) for c in job["after_script"]])
    return dict(job["variables"]), steps


def run_job(steps: list[tuple[str, bool]], env: dict, cwd: Path) -> tuple[bool, list[str]]:
    """Run the steps as the CI would: a failed step skips the later ones
    except those that always run. Returns (job passed, outputs)."""
    passed, outputs = True, []
    for command, always in steps:
        if command.strip() == INSTALL:
            continue
        if not passed and not always:
            continue
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", command], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=1200)
        outputs.append(done.stdout + done.stderr)
        passed = passed and done.returncode == 0
    return passed, outputs


@pytest.fixture(scope="module")
def gate_project(tmp_path_factory, zoo_family, cache_dir, warm_python):
    """A checkout-like folder (suites, thresholds, .venv) and the released
    model's report, made by the gate's own suites on zoo `retain`."""
    from unlearnbench.fixtures import zoo

    project = tmp_path_factory.mktemp("gate-project")
    for folder in ("suites", "thresholds"):
        shutil.copytree(ROOT / folder, project / folder)
    (project / ".venv").symlink_to(Path(sys.prefix))
    # The team's gate, sized to its data: the zoo's 32 shared-knowledge questions can tell a
    # difference of 0.11 from the retain model (`unlearnbench preflight`), not the default margin of 0.05.
    (project / "gate.yaml").write_text("dusk:\n  shared_knowledge_kept: {margin: 0.15}\n")
    data = ["--data-dir", f"dusk={zoo.data_dir(cache_dir)}", "--thresholds", str(project / "gate.yaml")]
    released = project / "released-reports"
    warm_python.run(["-m", "pytest", SUITES, "--model", f"released={zoo_family['retain']}",
                     "--full-model", str(zoo_family["full"]), "--retain-model", str(zoo_family["retain"]), *data,
                     "--report-dir", str(released), "--cache-dir", str(cache_dir), "-p", "no:cacheprovider"],
                    cwd=project)
    [baseline] = [p for p in released.glob("*/report.json") if p.parent.name != "latest"]
    return project, baseline, " ".join(data)


def job_env(recipe_env: dict, project: Path, baseline: Path, extra: str, candidate: Path, gate_dir: Path,
            cache_dir: Path, zoo_family: dict) -> dict:
    assert {"CANDIDATE", "FULL_MODEL", "RETAIN_MODEL", "BASELINE_REPORT", "SUITES", "GATE_DIR", "EXTRA_ARGS"} <= set(
        recipe_env), recipe_env
    return {**os.environ, **{k: str(v) for k, v in recipe_env.items()},
            "CANDIDATE": str(candidate), "FULL_MODEL": str(zoo_family["full"]),
            "RETAIN_MODEL": str(zoo_family["retain"]), "BASELINE_REPORT": str(baseline), "SUITES": SUITES,
            "GATE_DIR": str(gate_dir), "EXTRA_ARGS": f"{extra} --cache-dir {cache_dir}"}


def junit_counts(path: Path) -> dict:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}


@pytest.mark.parametrize("recipe", [github_steps, gitlab_steps], ids=["github-actions", "gitlab-ci"])
def test_the_ci_recipe_passes_a_good_candidate_and_fails_a_bad_one(recipe, gate_project, zoo_family, cache_dir,
                                                                    tmp_path):
    project, baseline, extra = gate_project
    recipe_env, steps = recipe()
    assert [c for c, _ in steps if c.strip() == INSTALL], "the recipe installs with scripts/bootstrap.sh"

    # A good candidate: retain-like (never saw the forget document), no regression.
    good_dir = tmp_path / "good"
    passed, outputs = run_job(steps, job_env(recipe_env, project, baseline, extra, zoo_family["retain"], good_dir,
                                             cache_dir, zoo_family), project)
    assert passed, "\n".join(o[-3000:] for o in outputs)
    counts = junit_counts(good_dir / "junit.xml")
    assert counts["tests"] > 0 and counts["failures"] == counts["errors"] == 0
    assert (good_dir / "artifact" / "report.html").is_file() and (good_dir / "artifact" / "report.json").is_file()
    ran = {case.get("name") for case in ET.parse(good_dir / "junit.xml").getroot().iter("testcase")}
    assert "test_no_regression[candidate]" in ran  # judged against the released model's report

    # A bad candidate: the full model (nothing unlearned) fails the job, and
    # the JUnit XML and the HTML artifact still come out.
    bad_dir = tmp_path / "bad"
    passed, outputs = run_job(steps, job_env(recipe_env, project, baseline, extra, zoo_family["full"], bad_dir,
                                             cache_dir, zoo_family), project)
    assert not passed
    counts = junit_counts(bad_dir / "junit.xml")
    assert counts["failures"] >= 2  # the forget checks at least, and the regression test
    assert (bad_dir / "artifact" / "report.html").is_file()
    failed = ET.parse(bad_dir / "junit.xml").getroot().iter("testcase")
    names = {case.get("name") for case in failed if case.find("failure") is not None}
    assert "test_unique_forget_knowledge_removed[candidate]" in names
    assert "test_no_regression[candidate]" in names


def test_the_artifact_and_junit_paths_are_the_ones_the_gate_writes():
    """The upload steps (not shell commands) name the folders the run: steps fill."""
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    [job] = workflow["jobs"].values()
    uses = {s["uses"].split("@")[0]: s for s in job["steps"] if "uses" in s}
    assert uses["actions/upload-artifact"]["with"]["path"] == "${{ env.GATE_DIR }}/artifact/"
    assert uses["actions/upload-artifact"]["if"] == "always()"
    assert uses["mikepenz/action-junit-report"]["with"]["report_paths"] == "${{ env.GATE_DIR }}/junit.xml"
    gitlab = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())["unlearning-gate"]
    gate_dir = gitlab["variables"]["GATE_DIR"]
    assert gitlab["artifacts"]["when"] == "always"
    assert gitlab["artifacts"]["paths"] == [f"{gate_dir}/artifact/"]
    assert gitlab["artifacts"]["reports"]["junit"] == f"{gate_dir}/junit.xml"
