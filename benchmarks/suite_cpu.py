"""Where `make test`'s time goes: the machine's busy and idle core-seconds, and every process's CPU.

    python benchmarks/suite_cpu.py                              # make test's pytest line (Makefile PYTEST_CORE)
    python benchmarks/suite_cpu.py -- tests/test_probe.py -n 0  # any pytest arguments after --
    python benchmarks/suite_cpu.py --json out.json              # the per-process rows too

Why it exists: pytest's durations say how long a test took, not what it spent. A test that starts
`grpo-ablate run` in a subprocess, or whose trials run in a warm session forked from a template,
spends its CPU in processes pytest does not wait on, and `/usr/bin/time` misses every process that
is reparented (a killed trial's children, a daemonised PostgreSQL). So this runs the suite and, every
half second, reads every process's CPU seconds from /proc (utime + stime, keyed by pid and start
time so a reused pid is a new row), its command line, its parent, and the test that was running
when it started (PYTEST_CURRENT_TEST in its environment). Only processes started after the run
began count: a kernel thread's CPU since boot is not the suite's. /proc/stat before and after gives
the machine's busy and idle core-seconds: a suite that leaves cores idle is waiting (sleeps, grace
periods), one that does not is bound by the CPU its processes do.

A process shorter than the half-second sample is missed (a few hundredths of a second each). A
warm session forked from a template has the template's command line; it is told apart by its
parent. The test named for a forked session is the one that started its template.
Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST_CORE = ["-m", "not gpu and not vllm", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", "tests"]
SAMPLE_SECONDS = 0.5
TICKS = os.sysconf("SC_CLK_TCK")


def _machine_ticks() -> tuple[int, int]:
    """(all ticks, idle + iowait ticks) of every core, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]


def _boot_ticks_now() -> float:
    """Clock ticks since boot, the unit of /proc/PID/stat's start time."""
    return float(Path("/proc/uptime").read_text().split()[0]) * TICKS


class Sampler(threading.Thread):
    """Every process started after `since` (ticks since boot): its latest CPU seconds, command, parent, test."""

    def __init__(self, since: float) -> None:
        super().__init__(daemon=True)
        self.since, self.rows, self.done = since, {}, threading.Event()
        self.skip = _ancestry()  # this script and the shell that started it

    def run(self) -> None:
        while not self.done.is_set():
            self.sample()
            self.done.wait(SAMPLE_SECONDS)
        self.sample()

    def sample(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
                comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
                started = int(rest[19])
                if started < self.since:
                    continue
                key = (int(entry.name), started)
                if key[0] in self.skip:
                    continue
                cpu = (int(rest[11]) + int(rest[12])) / TICKS
                row = self.rows.get(key)
                if row is None:
                    row = self.rows[key] = {"pid": key[0], "ppid": int(rest[1]), "comm": comm,
                                            "cmd": _read(entry.path, "cmdline").replace("\0", " ").strip(),
                                            "test": _test_of(entry.path), "cpu": cpu}
                row["cpu"] = max(row["cpu"], cpu)
            except (OSError, ValueError, IndexError):
                continue  # gone between listing and reading


def _ancestry() -> set[int]:
    """This process and its ancestors' pids."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _read(folder: str, name: str) -> str:
    try:
        return Path(folder, name).read_bytes().decode(errors="replace")
    except OSError:
        return ""


def _test_of(folder: str) -> str:
    for item in _read(folder, "environ").split("\0"):
        if item.startswith("PYTEST_CURRENT_TEST="):
            return item.split("=", 1)[1].split("::", 1)[0].rsplit("/", 1)[-1]
    return ""


def kind(row: dict, rows_by_pid: dict[int, dict]) -> str:
    """A process's kind: the Python module or script it runs (a forked session told apart), else its program."""
    words = row["cmd"].split()
    if not words:
        return row["comm"]
    program = words[0].rsplit("/", 1)[-1]
    if not program.startswith("python"):
        if program == "grpo-ablate" and len(words) > 1:
            return f"grpo-ablate {words[1]}"
        return program
    args = [w for w in words[1:] if w not in ("-u", "-B")]
    if args[:1] == ["-m"] and len(args) > 1:
        name = args[1]
        if name == "grpo_ablate" and len(args) > 2:
            name = f"grpo_ablate {args[2]}"
        if "--template" in args:
            parent = rows_by_pid.get(row["ppid"])
            name += " (forked session)" if parent and "--template" in parent["cmd"] else " --template"
        return f"python -m {name}"
    if args[:1] == ["-c"]:
        return "python -c (pytest workers, helpers)"
    return f"python {args[0].rsplit('/', 1)[-1]}" if args else "python"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the per-process rows here")
    parser.add_argument("--top", type=int, default=25, help="rows to print per table")
    parser.add_argument("pytest_args", nargs="*", help="pytest arguments (after --); default: make test's")
    args = parser.parse_args(argv)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": ""}  # as the Makefile's TEST_ENV
    command = [sys.executable, "-m", "pytest", "-q", *(args.pytest_args or PYTEST_CORE)]

    sampler = Sampler(since=_boot_ticks_now() - TICKS)  # a tick of slack: the first child starts within it
    total0, idle0 = _machine_ticks()
    began = time.monotonic()
    sampler.start()
    result = subprocess.run(command, cwd=ROOT, env=env, check=False)
    wall = time.monotonic() - began
    sampler.done.set()
    sampler.join()
    total1, idle1 = _machine_ticks()

    cores = os.cpu_count() or 1
    share = (idle1 - idle0) / max(1, total1 - total0)
    rows = list(sampler.rows.values())
    by_pid = {r["pid"]: r for r in rows}
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    by_test: Counter[str] = Counter()
    for r in rows:
        k = by_kind[kind(r, by_pid)]
        k[0] += 1
        k[1] += r["cpu"]
        by_test[r["test"] or "(no test: pytest, its workers, services)"] += r["cpu"]
    print(f"\n{' '.join(command[2:])}\nexit {result.returncode}; {wall:.1f} s wall on {cores} cores: "
          f"{wall * cores * (1 - share):.0f} busy and {wall * cores * share:.0f} idle core-seconds; "
          f"{len(rows)} processes started, {sum(r['cpu'] for r in rows):.0f} CPU seconds among them")
    print("\nCPU s  procs  kind")
    for name, (n, cpu) in sorted(by_kind.items(), key=lambda x: -x[1][1])[:args.top]:
        print(f"{cpu:6.1f} {n:5d}  {name}")
    print("\nCPU s  started by (test file)")
    for name, cpu in by_test.most_common(args.top):
        print(f"{cpu:6.1f}  {name}")
    if args.json:
        args.json.write_text(json.dumps({"wall": wall, "idle_share": share, "rows": rows}, indent=0))
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
