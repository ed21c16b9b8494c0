"""SLURM's client commands behind wrapper scripts on PATH, made to fail or answer late on cue (issue 52).

(A controller that is away for real is tests/slurm_cluster.py's stop_controller; these make the client's own
failures happen on cue: a refusal, an answer that comes after the client's timeout.)

A folder of `sbatch`, `squeue`, `scontrol` and `sacct` scripts that call the real ones by absolute path, except
while their cue file says otherwise (`Cues`):
- `refuse`: the next N sbatch calls print "Unable to contact slurm controller" and exit 1 (nothing submitted);
- `slow`: the next sbatch submits for real, then answers S seconds late (past the client's timeout);
- `go_slow(S, D)`: from now on every query answers truly but D seconds late, for S seconds (an overloaded
  controller: past the client's timeout, the client must conclude nothing);
- `go_down(S)`: from now on every query (squeue, scontrol, sacct; `scontrol ping` says DOWN) fails as an
  unreachable controller for S seconds, as during a controller outage, while the real job runs on.
Each real submission's job id is appended to `submitted`, so a test counts the jobs.

    wrappers = FaultyClients.install(tmp_path / "bin", cluster.env)
    env = wrappers.env        # PATH with the wrappers first
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FaultyClients"]

_UNREACHABLE = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"

_COMMON = """#!/bin/sh
cues="{cues}"
now=$(date +%s)
down_until=$(cat "$cues/down_until" 2>/dev/null || echo 0)
"""

_SBATCH = _COMMON + """refuse=$(cat "$cues/refuse" 2>/dev/null || echo 0)
if [ "$refuse" -gt 0 ]; then
  echo $((refuse - 1)) > "$cues/refuse"
  echo "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)" >&2
  exit 1
fi
out=$({real} "$@")
code=$?
if [ $code -eq 0 ]; then
  echo "$out" | cut -d';' -f1 >> "$cues/submitted"
  slow=$(cat "$cues/slow" 2>/dev/null || echo 0)
  if [ "$slow" -gt 0 ]; then echo 0 > "$cues/slow"; sleep "$slow"; fi
fi
echo "$out"
exit $code
"""

_QUERY = _COMMON + """if [ "$now" -lt "$down_until" ]; then
  if [ "$1" = "ping" ]; then echo "Slurmctld(primary) at localhost is DOWN"; exit 1; fi
  echo "{unreachable}" >&2
  exit 1
fi
slow_until=$(cat "$cues/slow_until" 2>/dev/null || echo 0)
if [ "$now" -lt "$slow_until" ]; then
  echo "$0 $*" >> "$cues/slow_queries"
  sleep "$(cat "$cues/slow_query_s")"
fi
exec {real} "$@"
"""


@dataclass
class FaultyClients:
    folder: Path
    cues: Path
    env: dict[str, str]

    @classmethod
    def install(cls, folder: Path, env: dict[str, str]) -> "FaultyClients":
        cues = folder / "cues"
        cues.mkdir(parents=True)
        for name in ("sbatch", "squeue", "scontrol", "sacct"):
            real = shutil.which(name, path=env.get("PATH")) or shutil.which(name, path="/usr/sbin:/usr/bin")
            assert real, f"no {name} on PATH"
            text = (_SBATCH if name == "sbatch" else _QUERY).format(cues=cues, real=real, unreachable=_UNREACHABLE)
            (folder / name).write_text(text)
            (folder / name).chmod(0o755)
        return cls(folder, cues, dict(env, PATH=f"{folder}{os.pathsep}{env.get('PATH', os.defpath)}"))

    def cue(self, **values: int) -> None:
        """refuse=N (the next N sbatch calls), slow=SECONDS (the next sbatch that submits)."""
        for name, value in values.items():
            (self.cues / name).write_text(f"{int(value)}\n")

    @property
    def submitted(self) -> list[str]:
        path = self.cues / "submitted"
        return [line for line in path.read_text().split() if line] if path.exists() else []

    def go_down(self, seconds: float) -> None:
        """Every query fails as an unreachable controller from now for `seconds`."""
        (self.cues / "down_until").write_text(f"{int(time.time() + seconds)}\n")

    def go_slow(self, seconds: float, delay: float) -> None:
        """Every query from now for `seconds` answers (truly) only after `delay` seconds, as an overloaded controller does."""
        (self.cues / "slow_query_s").write_text(f"{int(delay)}\n")
        (self.cues / "slow_until").write_text(f"{int(time.time() + seconds)}\n")

    @property
    def slow_queries(self) -> int:
        """How many queries were answered late."""
        path = self.cues / "slow_queries"
        return len(path.read_text().splitlines()) if path.exists() else 0

    @property
    def down(self) -> bool:
        path = self.cues / "down_until"
        return path.exists() and int(path.read_text().strip() or 0) > time.time()
