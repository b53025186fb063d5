"""Compare two report.json files field by field: what a change that keeps
behaviour (a refactor) must leave equal.

    python scripts/compare_reports.py OLD/report.json NEW/report.json [--allow-added] [--same OLD_TEXT NEW_TEXT]

Every checkpoint's suites (metrics with their per-item values and details,
checks with their verdicts and reasons), the references and the assessment
(verdicts, ranking, order) are compared exactly; what differs between two
runs of the same work is left out (timings, process and cache flags, the
run's id, times and paths). A field only the new report has is listed, and
with --allow-added does not count as a difference (a refactor may add a
field; it may not change one). `--same /tmp/cache-a /tmp/cache-b` reads the
old report with one text replaced by another (two runs with their own
--cache-dir name their data by different paths). Exit status 0 when equal,
1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

# Differ between two runs of the same work.
VOLATILE = {"timings", "worker", "from_cache", "load_seconds", "seconds", "duration_s", "started_at", "finished_at",
            "directory", "cwd", "command", "cache", "id", "source_run", "thresholds_file", "evaluate_s"}


def walk(old: object, new: object, path: str, changed: list[str], added: list[str]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            if key in VOLATILE:
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in new:
                changed.append(f"{where}: only in the old report")
            elif key not in old:
                added.append(where)
            else:
                walk(old[key], new[key], where, changed, added)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            walk(a, b, f"{path}[{i}]", changed, added)
    elif old != new and not (old != old and new != new):  # NaN equals NaN here
        changed.append(f"{path}: {json.dumps(old)[:120]} -> {json.dumps(new)[:120]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--allow-added", action="store_true", help="fields only the new report has are not differences")
    parser.add_argument("--same", nargs=2, action="append", default=[], metavar=("OLD_TEXT", "NEW_TEXT"),
                        help="text of the old report that the new one writes differently (a cache folder)")
    args = parser.parse_args()
    old_text = args.old.read_text()
    for before, after in args.same:
        old_text = old_text.replace(json.dumps(before)[1:-1], json.dumps(after)[1:-1])
    old, new = json.loads(old_text), json.loads(args.new.read_text())
    changed: list[str] = []
    added: list[str] = []
    for part in ("checkpoints", "references", "assessment", "summary"):
        walk(old.get(part), new.get(part), part, changed, added)
    kinds = Counter(a.rsplit(".", 1)[-1] for a in added)  # a field's name, how many places gained it
    compared = sum(len(s.get("metrics", {})) + len(s.get("checks", {}))
                   for c in old["checkpoints"].values() for s in c.get("suites", {}).values())
    print(f"compared {len(old['checkpoints'])} checkpoints, {compared} metrics and checks: "
          f"{len(changed)} differences, {len(added)} added fields")
    for line in changed[:40]:
        print(f"  changed {line}")
    for name, count in kinds.most_common(20):
        print(f"  added   {name} ({count} places, e.g. {next(a for a in added if a.endswith('.' + name))})")
    return 0 if not changed and (args.allow_added or not added) else 1


if __name__ == "__main__":
    sys.exit(main())
