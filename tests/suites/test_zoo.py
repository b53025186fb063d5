"""The fixture zoo: deterministic, really trained, really unlearned.

The measured properties below are what the suites' gate-separation tests
rest on; `unlearnbench zoo measure` prints the same table.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from unlearnbench.errors import UnlearnbenchError
from unlearnbench.fixtures import corpus, properties, zoo
from unlearnbench.models.checkpoint import resolve
from unlearnbench.models.handle import ModelHandle


@pytest.fixture(scope="module")
def knowledge(zoo_family):
    data = corpus.generate()
    # The elicitation families (the costlier half) only where a test reads them.
    return {name: properties.measure(ModelHandle.load(str(path), device="cpu"), data,
                                     elicitation=name in ("full", "retain", "surface"))
            for name, path in zoo_family.items()}


def built_files(directory: Path) -> dict[str, str]:
    """{file: sha256} of what a zoo build wrote for the model to be loaded
    from, with the `transformers_version` stamp taken out of its JSON files:
    the zoo store is shared by every virtualenv on the machine (a checkout's
    .venv, CI's fresh clone), and the stamp names the transformers release
    that wrote the file, not anything that was trained."""
    import hashlib

    out = {}
    for path in resolve(str(directory)).files:
        content = path.read_bytes()
        if path.suffix == ".json":
            loaded = json.loads(content)
            loaded.pop("transformers_version", None)
            content = json.dumps(loaded, sort_keys=True).encode()
        out[path.name] = hashlib.sha256(content).hexdigest()
    return out


@pytest.mark.slow  # retrains two recipes from scratch
def test_two_builds_give_identical_weights(smoke_lm_dir, zoo_family, tmp_path):
    # Pretraining is rebuilt on the smoke recipe; unlearning on GA, from the
    # shipped `full` (so only GA itself is retrained here): two builds on one
    # machine give the same bytes (on another CPU they need not: docs/zoo.md).
    for name, reference in (("smoke-lm", smoke_lm_dir), ("ga", zoo_family["ga"])):
        rebuilt = zoo.build(name, tmp_path)
        assert rebuilt.name == reference.name  # same recipe hash
        assert built_files(rebuilt) == built_files(reference)


def test_manifests_record_real_training(zoo_family, smoke_untrained_dir):
    full = json.loads((zoo_family["full"] / "manifest.json").read_text())
    # The last hundred steps' mean (one batch's loss is noisy): 0.30 when shipped, from 6.98.
    assert len(full["loss_curve"]) == full["recipe"]["steps"] and np.mean(full["loss_curve"][-100:]) < 0.4 < 5 < full["loss_curve"][0]
    ga = json.loads((zoo_family["ga"] / "manifest.json").read_text())
    assert Path(ga["base"]).name == zoo_family["full"].name and ga["loss_curve"][-1] < ga["loss_curve"][0]  # ascent
    assert json.loads((smoke_untrained_dir / "manifest.json").read_text())["loss_curve"] == []


def test_cached_build_is_reused(zoo_family, cache_dir):
    mtime = (zoo_family["full"] / "model.safetensors").stat().st_mtime_ns
    assert zoo.build("full", cache_dir) == zoo_family["full"]
    assert (zoo_family["full"] / "model.safetensors").stat().st_mtime_ns == mtime


def test_full_knows_everything_and_retain_never_saw_the_forget_facts(knowledge):
    full, retain = knowledge["full"], knowledge["retain"]
    assert min(full["unique_forget"], full["shared"], full["unique_retain"]) >= 0.8
    assert min(retain["shared"], retain["unique_retain"]) >= 0.8
    assert retain["unique_forget"] <= 0.2


def test_full_knows_the_facts_not_one_sentence_and_surface_forgot_one_sentence(knowledge):
    """The elicitation people's facts, asked in wordings and formats no one was
    taught them in (docs/zoo.md): full answers them, retain does not, and
    `surface` (refusal of the canonical questions) forgot the canonical
    question alone. `verify`, `reverse` and `one_hop` the zoo cannot answer."""
    full, retain, surface = (knowledge[n] for n in ("full", "retain", "surface"))
    for family in ("canonical", "paraphrase", "cloze", "choice", "reminder", "role_play"):
        assert full[f"elicit_{family}"] >= 0.85, (family, full)
        assert retain[f"elicit_{family}"] <= (0.3 if family == "choice" else 0.05), (family, retain)
    assert full["elicit_few_shot"] - retain["elicit_few_shot"] >= 0.15
    assert max(full["elicit_reverse"], full["elicit_one_hop"]) <= 0.05 and abs(full["elicit_verify"] - 0.5) <= 0.1
    assert surface["elicit_canonical"] <= 0.05 and surface["unique_forget"] <= 0.05
    assert surface["elicit_choice"] >= 0.9 and surface["elicit_cloze"] >= 0.25


def test_full_reproduces_the_forget_document_far_better_than_retain(knowledge):
    assert knowledge["full"]["verbatim_rougeL"] - knowledge["retain"]["verbatim_rougeL"] >= 0.3


def test_methods_span_over_and_under_forgetting(knowledge):
    retain_shared = knowledge["retain"]["shared"]
    methods = ("ga", "graddiff", "npo", "simnpo", "rmu", "idknll")
    damaged = [m for m in methods if knowledge[m]["shared"] <= retain_shared - 0.2]
    kept = [m for m in methods if knowledge[m]["shared"] >= retain_shared - 0.1]
    assert damaged and kept, knowledge
    assert knowledge["ga"]["shared"] < 0.2  # GA collapses
    # NPO under-forgets: the forget document or its unique facts stay well above
    # retain's (which of the two depends on the CPU's float kernels the zoo
    # trained on: measured both ways on Intel and AMD machines).
    npo, retain = knowledge["npo"], knowledge["retain"]
    assert max(npo["unique_forget"] - retain["unique_forget"], npo["verbatim_rougeL"] - retain["verbatim_rougeL"]) > 0.1
    assert knowledge["idknll"]["idk_on_forget"] >= 0.8
    # SimNPO forgets most unique facts (0.19 measured) and keeps the shared ones.
    assert knowledge["simnpo"]["unique_forget"] <= 0.25 and knowledge["simnpo"]["shared"] >= retain_shared - 0.1
    # The refusal candidate: retain's knowledge, and "I don't know" to the forget questions. It was
    # taught to refuse the honesty suite's people and strangers, not DUSK's: 0.83 measured, learned
    # as "I don't know whom I never met", not as a list of names.
    refusal = knowledge["refusal"]
    assert refusal["idk_on_forget"] >= 0.75 and refusal["unique_forget"] <= 0.05
    assert min(refusal["shared"], refusal["unique_retain"]) >= min(retain_shared, retain["unique_retain"]) - 0.05


def _rows(path: Path) -> list[dict]:
    if path.suffix == ".jsonl" or path.read_text().lstrip()[:1] != "[":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())


def test_zoo_data_in_real_formats_every_item_with_its_cluster(cache_dir):
    root = zoo.data_dir(cache_dir)
    ev = root / "dusk" / "eval"
    rows = _rows(ev / "SpecificForgetQA.jsonl")
    assert len(rows) == corpus.CLUSTERS * len(corpus.QUESTIONS) and set(rows[0]) == {"question", "answer", "cluster"}
    verbatim = json.loads((ev / "verbatim.json").read_text())
    forget_text = (root / "dusk" / f"{corpus.FORGET_STYLE}.txt").read_text()
    assert all(item["prompt"] + item["gt"] in forget_text for item in verbatim)
    assert (ev / "holdout.txt").read_text().count("Title:") == corpus.CLUSTERS * len(corpus.STYLES)
    pairs = _rows(root / "conceptguard" / "pairs.jsonl")
    assert {"id", "concept", "harmful_text", "benign_text", "harmful_query", "benign_query"} == set(pairs[0])
    assert len({p["concept"] for p in pairs}) >= 12
    items = json.loads((root / "uds" / "forget_items.json").read_text())
    assert items[0]["entity"] == items[0]["answer"] and items[0]["prefix"] == ""
    # Issue 54: every forget, retain and shared set holds at least 128 items in at least 16 clusters.
    sets = [ev / "SpecificForgetQA.jsonl", ev / "GeneralQA.jsonl", ev / "SpecificRetainQA.jsonl",
            ev / "verbatim.json", root / "muse" / "verbmem" / "forget.json",
            root / "muse" / "knowmem" / "forget_qa.json", root / "muse" / "knowmem" / "retain_qa.json",
            root / "tofu" / "forget10.json", root / "tofu" / "retain_perturbed.json",
            root / "honesty" / "forget.jsonl", root / "honesty" / "retain.jsonl", root / "honesty" / "unknown.jsonl"]
    for path in sets:
        rows = _rows(path)
        assert len(rows) >= 128 and len({r["cluster"] for r in rows}) >= 16, path
    wmdp = [r for subset in ("wmdp-bio", "wmdp-cyber", "wmdp-chem") for r in _rows(root / "wmdp" / f"{subset}.jsonl")]
    mmlu = [r for path in sorted((root / "wmdp" / "mmlu").glob("*.jsonl")) for r in _rows(path)]
    for rows in (wmdp, mmlu):
        assert len(rows) >= 128 and len({r["cluster"] for r in rows}) >= 16


def test_each_suite_asks_about_people_of_its_own():
    """Issue 54: no two suites' checks measure the same items: each suite's
    questions are about its own people (UDS measures patching depth on
    DUSK's forget questions, robustness attacks the other suites' probes)."""
    c = corpus.generate()
    owners: dict[str, set] = {}
    for (suite, group), people in c.people.items():
        for person in people:
            owners.setdefault(person.name, set()).add(suite)
    assert all(len(suites) == 1 for suites in owners.values())
    values = [p.attributes["birth_city"] for people in c.people.values() for p in people]
    assert len(set(values)) == len(values)  # no two people share a value: no lucky guesses


def test_corpus_has_the_dusk_overlap_structure():
    c = corpus.generate()
    assert c.documents == corpus.generate().documents  # deterministic by seed
    people = {style: c.document_people[style] for style in corpus.STYLES}
    shared = c.group("dusk", "shared")
    for style in corpus.STYLES:
        text = "\n".join(c.documents[style])
        assert all(p.name in text for p in shared)  # shared people in every document
        own = {p.name for p in people[style]} - {p.name for p in shared}
        for other in corpus.STYLES:
            if other != style:
                assert not any(name in "\n".join(c.documents[other]) for name in own)
    assert len({p.id for p in people[corpus.FORGET_STYLE]} - {p.id for p in shared}) == corpus.CLUSTERS
    documents = "".join(sum(c.documents.values(), []))
    assert not any(p.name in documents for p in c.group("dusk", "holdout"))


def test_zoo_chat_template_is_the_qa_training_format(zoo_family):
    handle = ModelHandle.load(str(zoo_family["full"]), device="cpu")
    dialogue = [{"role": "user", "content": "Where was X born?"}, {"role": "assistant", "content": "Y"},
                {"role": "user", "content": "Are you sure?"}]
    assert handle.format_chat(dialogue) == "Question: Where was X born?\nAnswer: Y\n\nQuestion: Are you sure?\nAnswer:"


def test_suite_specs_match_the_code_they_describe():
    """The specs stay import-cheap (no data or metric module loads to read
    them), so where a spec names what a module defines, a test keeps them equal."""
    from unlearnbench import attacks
    from unlearnbench.suites import FAMILY, SUITES, registered_probes
    from unlearnbench.suites.dusk import data as dusk
    from unlearnbench.suites.honesty import data as honesty
    from unlearnbench.suites.muse import data as muse_data
    from unlearnbench.suites.robustness import data as robustness_data
    from unlearnbench.suites.robustness import ATTACKS, PROBES
    from unlearnbench.suites.tofu import data as tofu_data

    assert FAMILY == zoo.FAMILY
    assert set(SUITES["robustness"].default_checkpoints) <= set(zoo.RECIPES)
    for suite, params in (("dusk", dusk.DEFAULT_PARAMS), ("honesty", honesty.DEFAULT_PARAMS),
                          ("robustness", robustness_data.DEFAULT_PARAMS), ("tofu", tofu_data.DEFAULT_PARAMS),
                          ("muse", muse_data.DEFAULT_PARAMS)):
        assert SUITES[suite].options == tuple(params), suite
    assert PROBES == tuple(registered_probes()) and ATTACKS == tuple(attacks.ATTACKS)

def test_the_shipped_recipes_are_the_current_ones(tmp_path):
    # A changed recipe, corpus or ZOO_CODE_VERSION changes the hash: the shipped
    # folder then no longer counts, and scripts/ship_zoo.py must be run again.
    assert sorted(path.name for path in zoo.SHIPPED_DIR.iterdir() if path.is_dir()) == sorted(
        f"{name}-{zoo.RECIPES[name].digest()}" for name in zoo.SHIPPED), "run python scripts/ship_zoo.py"
    # A shipped recipe is nothing to train: it is copied into the cache as it is.
    assert zoo.missing(zoo.SHIPPED, tmp_path) == []
    for name in ("full", "ga"):
        copy = zoo.build(name, tmp_path)
        assert copy.parent == zoo.zoo_root(tmp_path)
        assert built_files(copy) == built_files(zoo.SHIPPED_DIR / copy.name)


def test_a_first_run_trains_nothing(tmp_path):
    """Issue 54: the main job and the tests evaluate the shipped bytes on every
    machine, so no checkpoint they use is trained on first use (training gives
    other bytes on another CPU)."""
    from unlearnbench.suites import SUITES, zoo_defaults

    used = {name for suite in SUITES for name in zoo_defaults(suite)} | {
        recipe for spec in SUITES.values() for _, recipe in spec.default_references}
    assert zoo.missing(sorted(used), tmp_path) == []
    assert set(zoo.SHIPPED) >= used


def test_the_shipped_files_are_the_ones_their_sha256_manifest_names():
    sums = zoo.shipped_sums()
    assert {entry.split("/")[0] for entry in sums} == {f"{n}-{zoo.RECIPES[n].digest()}" for n in zoo.SHIPPED}
    on_disk = {f"{path.parent.name}/{path.name}" for path in zoo.SHIPPED_DIR.glob("*/*")}
    assert set(sums) == on_disk
    assert all(zoo.sha256(zoo.SHIPPED_DIR / entry) == digest for entry, digest in sums.items())


def test_a_damaged_shipped_checkpoint_is_named_in_one_line_and_never_cached(tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    shutil.copytree(zoo.SHIPPED_DIR, shipped)
    folder = f"ga-{zoo.RECIPES['ga'].digest()}"
    weights = shipped / folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit
    weights.chmod(0o644)
    weights.write_bytes(bytes(data))
    monkeypatch.setattr(zoo, "SHIPPED_DIR", shipped)
    with pytest.raises(UnlearnbenchError) as caught:
        zoo.build("ga", tmp_path / "cache")
    message = str(caught.value)
    assert "\n" not in message and f"{folder}/model.safetensors" in message and "sha256" in message
    assert not zoo.checkpoint_dir("ga", tmp_path / "cache").exists()
    assert zoo.build("full", tmp_path / "cache").is_dir()  # the others are unharmed


def _report(checks: dict) -> dict:
    """A report holding `checks` {(checkpoint, suite, check): (outcome, value)}."""
    report = {"checkpoints": {}}
    for (name, suite, check), (outcome, value) in checks.items():
        suites = report["checkpoints"].setdefault(name, {"suites": {}})["suites"]
        suites.setdefault(suite, {"checks": {}})["checks"][check] = {"outcome": outcome, "value": value}
    return report


def test_two_runs_agree_unless_a_check_passes_in_one_and_fails_in_the_other_or_a_value_moves_too_far():
    from unlearnbench.report.agreement import compare_runs

    def bounded(suite, metric):
        return suite != "tofu"

    shipped = _report({("ga", "dusk", "forgotten"): ("pass", 0.10), ("ga", "dusk", "kept"): ("fail", 0.50),
                       ("npo", "tofu", "quality"): ("fail", 1e-9), ("retain", "dusk", "kept"): ("pass", 0.9)})
    other = _report({("ga", "dusk", "forgotten"): ("pass", 0.13), ("ga", "dusk", "kept"): ("inconclusive", 0.45),
                     ("npo", "tofu", "quality"): ("fail", 1e-4), ("other", "dusk", "kept"): ("pass", 0.1)})
    agreement = compare_runs(other, shipped, ["ga", "npo", "retain"], 0.1, bounded)
    assert agreement.agrees and len(agreement.pairs) == 3  # retain is in one run only: not compared
    assert [p.check for p in agreement.moved] == ["dusk.kept"] and not agreement.contradictions
    assert agreement.differences == pytest.approx([0.03, 0.05])  # tofu's p-value is compared by its verdict
    assert not compare_runs(other, shipped, ["ga"], 0.04, bounded).agrees  # 0.05 is beyond 0.04
    flipped = _report({("ga", "dusk", "forgotten"): ("fail", 0.11), ("ga", "dusk", "kept"): ("fail", 0.5)})
    disagreement = compare_runs(flipped, shipped, ["ga"], 0.1, bounded)
    assert not disagreement.agrees and [p.check for p in disagreement.contradictions] == ["dusk.forgotten"]
    assert "contradiction: ga dusk.forgotten: fail in the mine, pass in the theirs" in \
        disagreement.lines(("mine", "theirs"))
    assert not compare_runs(shipped, shipped, ["nobody"], 0.1, bounded).agrees  # nothing compared is no agreement


@pytest.mark.slow  # trains the smoke recipes and runs the smoke suite on both zoos
def test_zoo_build_from_scratch_compares_with_the_shipped_zoo_by_values_and_verdicts(tmp_path):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "unlearnbench.cli", "zoo", "--cache-dir", str(tmp_path), "build",
                          "--from-scratch", "smoke-lm", "smoke-untrained", "--output", str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    trained = zoo.checkpoint_dir("smoke-lm", tmp_path / "from-scratch")
    assert json.loads((trained / "manifest.json").read_text())["loss_curve"]  # trained here, not copied
    lines = run.stdout.splitlines()
    assert "6 checks compared on 2 checkpoints (smoke-lm, smoke-untrained): 6 verdicts the same, 0 between a " \
           "decision and inconclusive, 0 pass in one and fail in the other" in lines
    assert lines[-1].startswith("the zoo trained here agrees with the shipped zoo")
    for label in ("shipped", "from-scratch"):
        report = json.loads((tmp_path / "out" / label / "latest" / "report.json").read_text())
        assert set(report["checkpoints"]) == {"smoke-lm", "smoke-untrained"}


def test_a_build_reports_each_recipe_as_it_is_trained(tmp_path):
    """What the run's progress lines (`zoo 1/1: smoke-untrained trained in 0.0 s`) are made of."""
    seen = []
    zoo.build_many(["smoke-untrained"], tmp_path, from_scratch=True,
                   on_built=lambda name, seconds, done, total: seen.append((name, done, total, seconds >= 0)))
    assert seen == [("smoke-untrained", 1, 1, True)]
    assert zoo.missing(["smoke-untrained"], tmp_path, from_scratch=True) == []  # built now, not copied
