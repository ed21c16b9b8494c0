"""Does an earlier evaluation point rank arms as the final one does? The check the race's fidelity rests on.

    python benchmarks/early_rank.py                  # the 40-seed table
    python benchmarks/early_rank.py --table benchmarks/data/sequential_table_mixed60.json

Reads a committed many-seed table (benchmarks/sequential_table.py wrote it: every arm on every seed,
each trial's held-out reward at every evaluation point) and prints, per task and earlier point,
Kendall's tau of the arms' mean reward at that point against the final point with its 95% bootstrap
interval over seeds (grpo_ablate/study/search/early_rank.py), and whether the point is shown to rank as
the final one does. The race may use a point only where it is (it is on none of them today).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_ablate.study.search.early_rank import TAU_SHOWN, point_ranks, race_decides_at  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default=str(ROOT / "benchmarks/data/sequential_table.json"))
    args = ap.parse_args(argv)
    table = json.loads(Path(args.table).read_text())
    ranks = [r for task in table["settings"]["tasks"] for r in point_ranks(table["rows"], task)]
    for r in ranks:
        print(f"{r.task:<15} {r.share:>4.0%}  tau {r.tau:5.2f}  95% [{r.low:5.2f}, {r.high:5.2f}]  "
              f"{r.arms} arms x {r.seeds} seeds  {'shown' if r.shown else 'not shown'} (lower end >= {TAU_SHOWN:g})")
    print(race_decides_at(ranks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
