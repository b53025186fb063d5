"""ConceptGuard suite wall time per zoo checkpoint, with the reference judge,
judge cache cold and warm.

    python benchmarks/conceptguard_bench.py [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from unlearnbench.cache import DiskCache, SuiteMemo
from unlearnbench.metrics.judges import CachedJudge, ReferenceJudge
from unlearnbench.models.handle import ModelHandle
from unlearnbench.suites.conceptguard import data as cg_data
from unlearnbench.suites.conceptguard import metrics as conceptguard


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", type=Path, default=None, help="zoo cache (default: a temp dir)")
    args = parser.parse_args()
    from unlearnbench.fixtures import zoo

    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = args.cache_dir or Path(tmp)
        paths = zoo.build_many(zoo.FAMILY, cache_dir)
        data = cg_data.load(zoo.data_dir(cache_dir))
        judge_cache = SuiteMemo(DiskCache(Path(tmp) / "judge-cache"), "conceptguard", data.fingerprint, 1)
        reference = ReferenceJudge()
        print(f"zoo: {len(data.pairs)} pairs, {len(data.concepts)} concepts; reference judge (MiniLM)")
        totals = {"cold": 0.0, "warm": 0.0}
        for name in zoo.FAMILY:
            handle = ModelHandle.load(str(paths[name]), device="cpu")
            row = []
            for state in ("cold", "warm"):
                started = time.perf_counter()
                out = conceptguard.evaluate(handle, data, judge=CachedJudge(reference, judge_cache))
                seconds = time.perf_counter() - started
                totals[state] += seconds
                row.append(f"{state} {seconds:5.2f} s")
            print(f"  {name:9s} {'  '.join(row)}   CtxtSep {out['ctxt_sep'].value:+.2f}  "
                  f"HarmMem {out['harm_mem'].value:.2f}  HelpRet {out['help_ret'].value:.2f}")
        print(f"all 8 checkpoints: cold {totals['cold']:.1f} s, warm judge cache {totals['warm']:.1f} s "
              f"(cache hits {judge_cache.stats.hits}, misses {judge_cache.stats.misses})")


if __name__ == "__main__":
    main()
