"""`unlearnbench` command line: the fixture zoo, checkpoint inspection, reports.

Evaluation itself runs through pytest (`pytest suites/... --model PATH`);
this tool covers what happens around it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from unlearnbench.errors import UnlearnbenchError

# How far a checked value on a [0, 1] scale of a zoo trained on another CPU may
# lie from the shipped zoo's. Measured (docs/zoo.md): every recipe trained with
# AVX2 kernels against the shipped AVX-512 build, 188 such values: median
# difference 0, 90th percentile 0.047, largest 0.26 (graddiff's MMLU accuracy).
FROM_SCRATCH_TOLERANCE = 0.3
EPILOG = """\
Evaluation runs through pytest, not through this command:
  pytest suites                                   every suite on the built-in fixture zoo
  pytest suites/dusk --model ckpt/npo --full-model ckpt/full --retain-model ckpt/retain --data-dir dusk=data/dusk
  pytest suites -n auto --model-dir runs/ --full-model runs/full --retain-model runs/retain
Then: unlearnbench report reports/latest/report.json --failed
"""


def _zoo(args: argparse.Namespace) -> int:
    from unlearnbench.fixtures import zoo

    if args.zoo_command == "list":
        for name, recipe in zoo.RECIPES.items():
            built = (zoo.checkpoint_dir(name, args.cache_dir) / "manifest.json").is_file()
            print(f"{name:<20} {'built' if built else '-':<6} {recipe.description}")
        return 0
    if args.zoo_command == "path":
        print(zoo.checkpoint_dir(args.name, args.cache_dir))
        return 0
    if args.zoo_command == "data":
        print(zoo.data_dir(args.cache_dir))
        return 0
    if args.zoo_command == "build" and args.from_scratch:
        return _zoo_from_scratch(args)
    names = args.names or list(zoo.FAMILY if args.zoo_command == "measure" else zoo.RECIPES)
    paths = zoo.build_many(names, args.cache_dir, on_built=print_built)
    if args.zoo_command == "measure":
        return _zoo_measure(paths)
    for name, path in paths.items():
        manifest = json.loads((path / "manifest.json").read_text())
        loss = manifest["loss_curve"][-1] if manifest["loss_curve"] else None
        print(f"{name:<16} {path}  final loss {loss}  built in {manifest['build_seconds']} s")
    return 0


def print_built(name: str, seconds: float, done: int, total: int) -> None:
    """A zoo build's progress line on stderr (`zoo.build_many`'s `on_built`)."""
    print(f"trained {name} in {seconds:.1f} s ({done}/{total})", file=sys.stderr, flush=True)


def _zoo_from_scratch(args: argparse.Namespace) -> int:
    """Train recipes (and the bases they start from) from scratch in a cache of
    their own, run the suites that evaluate them on that zoo and on the
    shipped one, and compare the two runs check by check: the same verdicts,
    and values within the tolerance (docs/zoo.md). Exit 1 when they differ."""
    import subprocess
    import time

    from unlearnbench.cache import DEFAULT_CACHE_DIR
    from unlearnbench.fixtures import zoo
    from unlearnbench.report.agreement import compare_runs
    from unlearnbench.report.schema import load_report
    from unlearnbench.suites import SUITES, UNIT, default_file, zoo_defaults

    names = args.names or list(zoo.SHIPPED)
    for name in names:
        zoo.checkpoint_dir(name)  # an unknown name stops here, before any training
    cache = (args.cache_dir or DEFAULT_CACHE_DIR).expanduser()
    scratch = cache / "from-scratch"
    started = time.perf_counter()
    zoo.build_many(names, scratch, from_scratch=True, on_built=print_built)
    print(f"trained from scratch in {time.perf_counter() - started:.1f} s: {scratch / 'zoo'}")
    if args.no_compare:
        return 0
    trained = set(names) | {zoo.RECIPES[n].base for n in names if zoo.RECIPES[n].base}
    suites = [
        suite
        for suite, spec in SUITES.items()
        if trained & ({*zoo_defaults(suite)} | {recipe for _, recipe in spec.default_references})
    ]
    out = args.output or Path("reports") / f"zoo-from-scratch-{time.strftime('%Y%m%d-%H%M%S')}"
    # The suites' default test files and gates: a checkout's suites/ and thresholds/, or the wheel's defaults.
    tests = [str(default_file(suite, f"suites/{suite}/test_{suite}.py")) for suite in suites]
    reports = {}
    for label, cache_dir in (("shipped", cache), ("from-scratch", scratch)):
        print(f"running {', '.join(suites)} on the {label} zoo ...", flush=True)
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *tests,
                "-q",
                "-p",
                "no:cacheprovider",
                "--cache-dir",
                str(cache_dir),
                "--report-dir",
                str(out / label),
            ],
            capture_output=True,
            text=True,
        )
        if run.returncode not in (0, 1):  # 1: some gate failed, as the zoo's failing recipes do
            raise UnlearnbenchError(
                f"the pytest run on the {label} zoo exited with {run.returncode}:\n" + (run.stdout + run.stderr)[-2000:]
            )
        reports[label] = load_report(out / label / "latest" / "report.json")
    compared = [n for n in zoo.SHIPPED if n in trained]
    agreement = compare_runs(
        reports["from-scratch"],
        reports["shipped"],
        compared,
        args.tolerance,
        bounded=lambda suite, metric: SUITES[suite].scale_of.get(metric) == UNIT,
    )
    for line in agreement.lines(("zoo trained here", "shipped zoo")):
        print(line)
    print(
        f"the zoo trained here {'agrees with' if agreement.agrees else 'DIFFERS from'} the shipped zoo; reports: {out}"
    )
    return 0 if agreement.agrees else 1


def _zoo_measure(paths: dict) -> int:
    """The zoo's knowledge table: what each checkpoint knows, forgot, refuses."""
    from unlearnbench.fixtures import corpus, properties
    from unlearnbench.models.handle import ModelHandle

    data = corpus.generate()
    measured = {name: properties.measure(ModelHandle.load(str(path), name=name), data) for name, path in paths.items()}
    for columns in (
        ("unique_forget", "shared", "unique_retain", "idk_on_forget", "verbatim_rougeL"),
        tuple(c for c in next(iter(measured.values()), {}) if c.startswith("elicit_")),
    ):
        print(f"{'checkpoint':<12}" + "".join(f"{c:>17}" for c in columns))
        for name, values in measured.items():
            print(f"{name:<12}" + "".join(f"{values[c]:>17.2f}" for c in columns))
    return 0


def _init(args: argparse.Namespace) -> int:
    """Write suites' thin test files and default gates into a repository."""
    from unlearnbench.suites import SUITES, default_file

    suites = args.suite or list(SUITES)
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        raise UnlearnbenchError(f"unknown suite {unknown[0]!r} (known: {', '.join(SUITES)})")
    plan = []
    for suite in suites:
        for relative in (f"suites/{suite}/test_{suite}.py", f"thresholds/{suite}.yaml"):
            source = default_file(suite, relative)
            if source is None:
                raise UnlearnbenchError(
                    f"suite {suite} ships no default {relative} (its spec's `defaults` module "
                    f"{SUITES[suite].defaults} has none)"
                )
            plan.append((source, args.directory / relative))
    for source, target in plan:
        if target.exists() and not args.force:
            print(f"kept {target} (it exists; --force overwrites it)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        print(f"wrote {target}")
    print(
        f"no conftest.py is needed: the plugin loads through its pytest11 entry point. Next: cd {args.directory} "
        f"&& pytest suites/{suites[0]} --model PATH (edit thresholds/*.yaml to change the gates)"
    )
    return 0


def _preflight(args: argparse.Namespace) -> int:
    """Each check's power from the reference models alone: no candidate loads."""
    from unlearnbench.options import BenchOptions
    from unlearnbench.session import Bench
    from unlearnbench.suites import SUITES
    from unlearnbench.thresholds import power_line

    suites = args.suite or [s for s in SUITES if (args.thresholds_dir / f"{s}.yaml").is_file()]  # Bench checks names
    options = BenchOptions.from_values(
        data_dir=args.data_dir,
        device=args.device,
        seed=args.seed,
        alpha=args.alpha,
        power=args.power,
        full_model=args.full_model,
        retain_model=args.retain_model,
        cache_dir=args.cache_dir,
    )
    bench = Bench(options)
    bench.validate_checkpoints()
    bench.prepare_suites(suites, {s: args.thresholds_dir / f"{s}.yaml" for s in suites}, build_zoo=False)
    weak = 0
    for suite in suites:
        for power in bench.power(suite):
            weak += power["underpowered"]
            print(power_line(power))
    print(
        f"{weak} underpowered check(s) at alpha {args.alpha:g} and {100 * args.power:.0f}% power (see docs/verdicts.md)"
    )
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from unlearnbench.models.checkpoint import CheckpointSpec, fingerprint, resolve

    spec = CheckpointSpec.parse(args.checkpoint)
    resolved = resolve(spec.source)
    info = {
        "name": spec.name,
        "kind": resolved.kind,
        "path": resolved.display,
        "fingerprint": fingerprint(resolved.files),
        "files": [p.name for p in resolved.files],
    }
    if args.load:
        from unlearnbench.models.handle import ModelHandle

        info |= ModelHandle.load(resolved, name=spec.name, device=args.device).describe()
    print(json.dumps(info, indent=2))
    return 0


def _report(args: argparse.Namespace) -> int:
    """Verdicts and ranking of a report.json, then its checks (those that did
    not pass; every one with --all), filtered by checkpoint and suite."""
    from unlearnbench.report.schema import load_report
    from unlearnbench.report.text import check_lines, ranking_lines, verdict_lines

    report = load_report(args.report)
    known = set(report["checkpoints"])
    unknown = [c for c in args.checkpoint if c not in known]
    if unknown:
        raise UnlearnbenchError(
            f"{args.report}: no checkpoint {', '.join(unknown)} (it has: {', '.join(sorted(known))})"
        )
    suites = {s for c in report["checkpoints"].values() for s in c["suites"]}
    unknown = [s for s in args.suite if s not in suites]
    if unknown:
        raise UnlearnbenchError(f"{args.report}: no suite {', '.join(unknown)} (it has: {', '.join(sorted(suites))})")
    verdicts = report["assessment"]["verdicts"]
    chosen = [
        n
        for n in report["assessment"]["order"]
        if (not args.checkpoint or n in args.checkpoint) and (not args.failed or verdicts[n]["verdict"] == "fail")
    ]
    if not args.checkpoint and not args.suite and not args.failed:
        print(
            "\n".join(
                [
                    *verdict_lines(report),
                    "",
                    report["assessment"]["ranking"]["rule"],
                    *(("  " + line).rstrip() for line in ranking_lines(report)),
                    "",
                ]
            )
        )
    print("\n".join(check_lines(report, everything=args.all, checkpoints=set(chosen), suites=set(args.suite))))
    summary = report["summary"]
    print(
        f"\n{summary['passed']} passed, {summary['failed']} failed, {summary.get('inconclusive', 0)} inconclusive, "
        f"{summary['skipped']} skipped, {summary['errors']} errors"
    )
    return 1 if summary["failed"] or summary["errors"] else 0


def _merge(args: argparse.Namespace) -> int:
    from unlearnbench.report.merge import merge_reports
    from unlearnbench.report.model import Report
    from unlearnbench.report.schema import write_outputs
    from unlearnbench.report.text import path_lines, verdict_lines

    reports = [(str(path), Report.read(path)) for path in args.reports]
    merged = merge_reports(reports, force=args.force)
    for warning in merged.get("merge_warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    out = args.output / merged["run"]["id"]
    merged["run"]["directory"] = str(out.resolve())
    files = write_outputs(merged, out)
    print("\n".join(verdict_lines(merged)))
    print(f"merged {len(reports)} reports, {len(merged['checkpoints'])} checkpoints")
    print("\n".join(path_lines(files)))
    return 0


def _sweep(args: argparse.Namespace) -> int:
    from unlearnbench.sweep import sweep

    if args.ray is None:
        raise UnlearnbenchError(
            "sweep needs --ray [ADDRESS]; without Ray, run pytest itself "
            "(-n for one machine, --shard I/N for any scheduler)"
        )
    pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    status, _ = sweep(args.ray, pytest_args, cpus_per_task=args.cpus_per_task, gpus_per_task=args.gpus_per_task)
    return status


def _meta_eval(args: argparse.Namespace) -> int:
    """Labels first (a bad file stops before any model runs), then the report
    (given, or a `pytest suites` run here), then the table, JSON and page."""
    import subprocess
    import time

    from unlearnbench import meta_eval
    from unlearnbench.report.schema import load_report

    labels = meta_eval.Labels.load(args.labels)
    out = args.output or Path("reports") / f"meta-eval-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.report is None:
        pytest_args = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
        default = ["suites", *(arg for name in meta_eval.ZOO_EXTRA for arg in ("--zoo-extra", name))]
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *(pytest_args or default),
                "-p",
                "no:cacheprovider",
                "--report-dir",
                str(out / "run"),
            ]
        )
        if run.returncode not in (0, 1):  # 1: some gate failed, which meta-evaluation expects
            raise UnlearnbenchError(f"the pytest run for meta-evaluation exited with {run.returncode}")
        args.report = out / "run" / "latest" / "report.json"
    result = meta_eval.meta_evaluate(load_report(args.report), labels)
    print(meta_eval.table(result))
    json_path, html_path = meta_eval.write(result, out)
    print(f"meta-evaluation: {json_path}\nHTML: {html_path}")
    return 0


def _html(args: argparse.Namespace) -> int:
    from unlearnbench.atomic import atomic_write_text
    from unlearnbench.report.html import render
    from unlearnbench.report.schema import load_report

    out = args.output or args.report.with_suffix(".html")
    atomic_write_text(out, render(load_report(args.report)))
    print(out)
    return 0


def _site(args: argparse.Namespace) -> int:
    from unlearnbench.report.site import build_site

    board, notes = build_site(args.inputs, args.output)
    for note in notes:
        print(f"unlearnbench site: {note}", file=sys.stderr)
    rows = {r["id"] for g in board["groups"] for r in g["rows"]}
    print(
        f"site: {len(rows)} checkpoints from {len(board['runs'])} runs in {len(board['groups'])} comparable "
        f"setting{'s' if len(board['groups']) != 1 else ''}"
    )
    print(f"open {args.output / 'index.html'}  (also leaderboard.csv, leaderboard.json)")
    return 0


def _thresholds(args: argparse.Namespace) -> int:
    from unlearnbench.suites import SUITES
    from unlearnbench.thresholds import load_suite_thresholds

    suite = args.suite or args.file.stem
    if suite not in SUITES:
        raise UnlearnbenchError(f"unknown suite '{suite}' (known: {', '.join(SUITES)})")
    checks = load_suite_thresholds(
        args.file, suite, SUITES[suite].known_metrics, SUITES[suite].scale_of, SUITES[suite].kind_of
    )
    print(f"{args.file}: {len(checks)} valid checks for suite {suite}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unlearnbench",
        description=__doc__.splitlines()[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"unlearnbench {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    zoo = sub.add_parser("zoo", help="build, list or locate fixture-zoo checkpoints")
    zoo.add_argument("--cache-dir", type=Path, default=None, help="default ~/.cache/unlearnbench")
    zoo_sub = zoo.add_subparsers(dest="zoo_command", required=True)
    build = zoo_sub.add_parser("build", help="train (or find cached) zoo checkpoints")
    build.add_argument(
        "names", nargs="*", help="recipes to build (default: all; with --from-scratch, the shipped ones)"
    )
    build.add_argument(
        "--from-scratch",
        action="store_true",
        help="train even the shipped recipes (and their bases), in <cache>/from-scratch, then run the "
        "suites that evaluate them on that zoo and on the shipped one and compare: exit 1 when a "
        "check passes in one and fails in the other, or a value on a [0, 1] scale differs by "
        "more than --tolerance",
    )
    build.add_argument(
        "--tolerance",
        type=float,
        default=FROM_SCRATCH_TOLERANCE,
        help=f"largest difference of a checked value on a [0, 1] scale counted as the same (default "
        f"{FROM_SCRATCH_TOLERANCE:g}, measured: docs/zoo.md)",
    )
    build.add_argument("--no-compare", action="store_true", help="with --from-scratch: train only")
    build.add_argument(
        "--output",
        type=Path,
        default=None,
        help="with --from-scratch: the folder of the two runs' reports (default reports/zoo-from-scratch-TIME)",
    )
    zoo_sub.add_parser("list", help="recipes and whether they are built")
    zoo_sub.add_parser("data", help="the overlap corpus in the real data formats (written once)")
    measure = zoo_sub.add_parser("measure", help="build and tabulate what each checkpoint knows")
    measure.add_argument("names", nargs="*", help="recipes to measure (default: the unlearning family)")
    path = zoo_sub.add_parser("path", help="the checkpoint directory of a recipe")
    path.add_argument("name", help="a recipe name (see `unlearnbench zoo list`)")
    zoo.set_defaults(run=_zoo)

    init = sub.add_parser(
        "init",
        help="write the suites' test files and default gates into a repository of your own",
        description="unlearnbench init [DIR] [--suite NAME ...] [--force]: writes suites/<name>/test_<name>.py and "
        "thresholds/<name>.yaml (comments and rationales kept) for every registered suite, or those "
        "named; an existing file is kept unless --force",
    )
    init.add_argument("directory", nargs="?", type=Path, default=Path("."), help="the repository (default: here)")
    init.add_argument("--suite", action="append", default=[], metavar="NAME", help="only this suite (repeatable)")
    init.add_argument("--force", action="store_true", help="overwrite files that exist")
    init.set_defaults(run=_init)

    preflight = sub.add_parser(
        "preflight",
        help="which checks the data can decide at their margins, from the reference models alone",
        description="unlearnbench preflight [--suite S ...] [--data-dir [SUITE=]DIR ...] --full-model F "
        "--retain-model R: evaluates the reference models (cached, as a run does) and prints each "
        "check's smallest detectable difference at its n against its margin; without models, the "
        "fixture zoo's references",
    )
    preflight.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="SUITE",
        help="a suite to check (repeatable; default: every suite with a thresholds file)",
    )
    preflight.add_argument(
        "--data-dir",
        action="append",
        default=[],
        metavar="[SUITE=]DIR",
        help="data for every suite, or for one suite, as in a pytest run (repeatable)",
    )
    preflight.add_argument("--full-model", metavar="[NAME=]PATH")
    preflight.add_argument("--retain-model", metavar="[NAME=]PATH")
    preflight.add_argument(
        "--thresholds-dir",
        type=Path,
        default=Path("thresholds"),
        help="the folder of the suites' gates (default: ./thresholds)",
    )
    preflight.add_argument("--alpha", type=float, default=0.05, help="as the run's --alpha (default 0.05)")
    preflight.add_argument("--power", type=float, default=0.8, help="as the run's --power (default 0.8)")
    preflight.add_argument("--device", default="auto")
    preflight.add_argument("--seed", type=int, default=0)
    preflight.add_argument("--cache-dir", type=Path, default=None)
    preflight.set_defaults(run=_preflight)

    inspect = sub.add_parser("inspect", help="validate a checkpoint and print its fingerprint")
    inspect.add_argument("checkpoint", help="[NAME=]PATH: HF directory, .gguf file or Hub id")
    inspect.add_argument("--load", action="store_true", help="also load it and describe the model")
    inspect.add_argument("--device", default="auto")
    inspect.set_defaults(run=_inspect)

    report = sub.add_parser("report", help="print a report.json's verdicts, ranking and checks (filterable)")
    report.add_argument("report", type=Path, help="a report.json (reports/latest/report.json is the last run's)")
    report.add_argument(
        "--checkpoint", action="append", default=[], metavar="NAME", help="only this checkpoint's checks (repeatable)"
    )
    report.add_argument(
        "--suite", action="append", default=[], metavar="SUITE", help="only this suite's checks (repeatable)"
    )
    report.add_argument("--failed", action="store_true", help="only checkpoints whose verdict is FAIL")
    report.add_argument("--all", action="store_true", help="every check, not only those that did not pass")
    report.set_defaults(run=_report)

    merge = sub.add_parser("merge", help="merge reports of separate runs (sharded sweeps) into one")
    merge.add_argument("reports", nargs="+", type=Path, help="report.json files of the runs to merge")
    merge.add_argument("-o", "--output", type=Path, required=True, help="folder for <run-id>/report.{json,html}")
    merge.add_argument(
        "--force",
        action="store_true",
        help="merge even if thresholds or data fingerprints differ (recorded as warnings)",
    )
    merge.set_defaults(run=_merge)

    sweep = sub.add_parser(
        "sweep",
        help="spread a sweep over a Ray cluster: one task per checkpoint, one report",
        description="unlearnbench sweep --ray [ADDRESS] -- PYTEST_ARGS...: the arguments after "
        "-- are those of a pytest run (suites, --model, --model-dir, ...)",
    )
    sweep.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="HOST:PORT or ray://HOST:PORT of a running cluster, 'auto' (RAY_ADDRESS or the "
        "cluster on this machine); without ADDRESS, a Ray instance started here",
    )
    sweep.add_argument("--cpus-per-task", type=float, default=1.0, help="Ray CPUs each checkpoint's task asks for")
    sweep.add_argument(
        "--gpus-per-task",
        type=float,
        default=None,
        help="Ray GPUs each task asks for (default: 1 where the cluster has GPUs, else 0)",
    )
    sweep.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then the pytest run's arguments")
    sweep.set_defaults(run=_sweep)

    meta = sub.add_parser(
        "meta-eval",
        help="which metric deserves trust: faithfulness AUC and robustness R, Q, HM",
        description="unlearnbench meta-eval [--report REPORT.json] [--labels FILE.yaml] [-o DIR] "
        "[-- PYTEST_ARGS...]: without --report, runs `pytest suites` (or PYTEST_ARGS) "
        "first; without --labels, the zoo's labels",
    )
    meta.add_argument("--report", type=Path, default=None, help="an existing report.json to meta-evaluate")
    meta.add_argument(
        "--labels",
        type=Path,
        default=None,
        help="YAML: knows: [checkpoints that know the forget set], never_saw: [...], retain: NAME",
    )
    meta.add_argument("-o", "--output", type=Path, default=None, help="default: reports/meta-eval-<time>/")
    meta.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then the pytest run's arguments")
    meta.set_defaults(run=_meta_eval)

    html_cmd = sub.add_parser("html", help="(re)render a report.json as its self-contained HTML page")
    html_cmd.add_argument("report", type=Path, help="the report.json to render")
    html_cmd.add_argument("-o", "--output", type=Path, default=None, help="default: next to the JSON")
    html_cmd.set_defaults(run=_html)

    site = sub.add_parser(
        "site",
        help="a static leaderboard site from any number of reports (folders searched)",
        description="unlearnbench site REPORT_OR_DIR ... -o SITE/: reads every report.json under the inputs and "
        "writes index.html (the leaderboard per comparable setting, trade-off plots), a page per "
        "checkpoint and per run, leaderboard.csv and leaderboard.json; no server, no network "
        "(docs/leaderboard.md)",
    )
    site.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="REPORT_OR_DIR",
        help="report.json files, or folders searched for them (e.g. reports/)",
    )
    site.add_argument("-o", "--output", type=Path, required=True, help="the site's folder (created)")
    site.set_defaults(run=_site)

    thresholds = sub.add_parser("thresholds", help="validate a suite's thresholds YAML")
    thresholds.add_argument("file", type=Path, help="a thresholds/<suite>.yaml file")
    thresholds.add_argument("--suite", help="suite name (default: the file's stem)")
    thresholds.set_defaults(run=_thresholds)
    return parser


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("unlearnbench")
    except metadata.PackageNotFoundError:
        from unlearnbench import __version__

        return __version__


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (UnlearnbenchError, KeyError, ValueError, FileNotFoundError) as exc:
        print(f"unlearnbench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
