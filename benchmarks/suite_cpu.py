"""Where `make test`'s time goes: the machine's busy and idle core-seconds, and every process's CPU.

    python benchmarks/suite_cpu.py                              # make test's pytest line (Makefile PYTEST_CORE)
    python benchmarks/suite_cpu.py -- tests/test_probe.py -n 0  # any pytest arguments after --
    python benchmarks/suite_cpu.py --json out.json              # the per-process rows too
    python benchmarks/suite_cpu.py --files-json files.json -- tests/test_resume.py -n 2 --dist loadfile
                                                                # each test file's CPU seconds, also as JSON

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

Each test file's CPU seconds: a plugin loaded into pytest and its workers (`-p suite_cpu_timeline`,
benchmarks/suite_cpu_timeline.py, alone on PYTHONPATH) records, for every test, the worker's pid, its start and end on
the clock /proc counts start times in, and the CPU the worker spent in it (time.process_time, its
threads included: the in-process CLI, the trial run by `run_spec` in-process). Every other process
goes to the test that was running when it started, on the pytest worker it descends from (a
warm session forked from a template runs for the test that asked for it, not the one that started
the template); a process whose chain of parents no longer reaches a worker (a SLURM job under
slurmd, a daemonised PostgreSQL, a killed trial's children) goes to the test that was running, when
it started, on the worker whose environment it inherited (PYTEST_XDIST_WORKER), else to the test in
its PYTEST_CURRENT_TEST. A session
fixture's set-up counts for the test file that first asked for it; what no test accounts for
(pytest's own start and collection, the workers' start) is a row of its own.

A process shorter than the half-second sample is missed (a few hundredths of a second each).
Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
PYTEST_CORE = ["-m", "not gpu and not vllm and not stack", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", "tests"]
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
    """Every process started after `since` (ticks since boot): its latest CPU seconds, command, parent, test,
    and whether its environment carries `marker` (this run's, inherited by everything the suite starts)."""

    def __init__(self, since: float, marker: str) -> None:
        super().__init__(daemon=True)
        self.since, self.rows, self.done, self.marker = since, {}, threading.Event(), marker
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
                    environ = _read(entry.path, "environ").split("\0")
                    row = self.rows[key] = {"pid": key[0], "ppid": int(rest[1]), "comm": comm, "start": started / TICKS,
                                            "cmd": _read(entry.path, "cmdline").replace("\0", " ").strip(),
                                            "test": _test_of(environ), "worker": _worker_of(environ),
                                            "marked": self.marker in environ, "cpu": cpu}
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


def _test_of(environ: list[str]) -> str:
    for item in environ:
        if item.startswith("PYTEST_CURRENT_TEST="):
            return item.split("=", 1)[1].split("::", 1)[0].rsplit("/", 1)[-1]
    return ""


def _worker_of(environ: list[str]) -> str:
    """The pytest-xdist worker (gw0, gw1, ...) whose environment a process inherited; "" without xdist."""
    for item in environ:
        if item.startswith("PYTEST_XDIST_WORKER="):
            return item.split("=", 1)[1]
    return ""


class Parents:
    """Each row's parent row: the process of its parent pid that had started when it did (a pid the machine
    reused, by another user's process, is not its parent)."""

    def __init__(self, rows: list[dict]) -> None:
        self.by_pid: dict[int, list[dict]] = defaultdict(list)
        for r in sorted(rows, key=lambda r: r["start"]):
            self.by_pid[r["pid"]].append(r)

    def of(self, row: dict) -> dict | None:
        started = [p for p in self.by_pid.get(row["ppid"], []) if p["start"] <= row["start"]]
        return started[-1] if started else None


def kind(row: dict, parents: Parents) -> str:
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
            parent = parents.of(row)
            name += " (forked session)" if parent and "--template" in parent["cmd"] else " --template"
        return f"python -m {name}"
    if args[:1] == ["-c"]:
        return "python -c (pytest workers, helpers)"
    return f"python {args[0].rsplit('/', 1)[-1]}" if args else "python"


def ours(rows: list[dict], root: int) -> list[dict]:
    """The rows of the suite's processes: `root` (pytest) and its descendants, and whatever carries the run's
    marker in its environment (a daemon or an orphan whose parents are gone); not the other users' processes
    on a shared machine."""
    parents = Parents(rows)

    def descends(r: dict | None) -> bool:
        seen: set[int] = set()
        while r is not None and r["pid"] not in seen:
            if r["pid"] == root or r["ppid"] == root:
                return True
            seen.add(r["pid"])
            r = parents.of(r)
        return False
    return [r for r in rows if r["marked"] or descends(r)]


def _timeline(path: Path) -> dict[int, list[dict]]:
    """The plugin's rows by worker pid, in start order: {test, file, start, end, cpu}."""
    out: dict[int, list[dict]] = defaultdict(list)
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                out[row["pid"]].append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r["start"])
    return out


def per_file(rows: list[dict], timeline: dict[int, list[dict]]) -> tuple[dict[str, float], dict[str, float]]:
    """Each test file's CPU seconds: ({file: in-process worker CPU}, {file: its processes' CPU}) (module doc)."""
    parents = Parents(rows)
    inside: dict[str, float] = defaultdict(float)
    children: dict[str, float] = defaultdict(float)
    for tests in timeline.values():
        for t in tests:
            inside[t["file"]] += t["cpu"]
    for r in rows:
        if r["pid"] in timeline:  # a worker (or pytest itself, with -n 0): its CPU inside tests is counted above
            children[OUTSIDE] += max(0.0, r["cpu"] - sum(t["cpu"] for t in timeline[r["pid"]]))
            continue
        children[_file_of(r, parents, timeline)] += r["cpu"]
    return dict(inside), dict(children)


def _file_of(row: dict, parents: Parents, timeline: dict[int, list[dict]]) -> str:
    """The test file a process ran for: the test running on its worker when it started (module doc)."""
    start, seen, at = row["start"], set(), row
    while at is not None and at["pid"] not in seen:
        seen.add(at["pid"])
        pid = at["ppid"]
        if pid in timeline:
            for t in timeline[pid]:
                if t["start"] <= start <= t["end"]:
                    return t["file"]
            return OUTSIDE  # started by a worker between tests: a session fixture's teardown, the worker's start
        at = parents.of(at)
    # No parent chain to a worker (a SLURM job under slurmd, a daemonised server, a killed trial's children): the
    # test running when it started on the worker whose environment it inherited. Its PYTEST_CURRENT_TEST is only
    # the test that was running when its oldest ancestor started: for every SLURM job, the test that started the
    # worker's cluster (its session fixture), so one file was charged with every SLURM test's jobs.
    workers = [pid for pid, tests in timeline.items() if tests and tests[0].get("worker", "") == row.get("worker", "")]
    if len(workers) == 1:
        for t in timeline[workers[0]]:
            if t["start"] <= start <= t["end"]:
                return t["file"]
    return row["test"] or OUTSIDE


OUTSIDE = "(outside any test: pytest, its workers, services)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the per-process rows here")
    parser.add_argument("--files-json", type=Path, help="write each test file's CPU seconds here")
    parser.add_argument("--top", type=int, default=25, help="rows to print per table")
    parser.add_argument("pytest_args", nargs="*", help="pytest arguments (after --); default: make test's")
    args = parser.parse_args(argv)
    plugin = Path(tempfile.mkdtemp(prefix="suite-cpu-"))  # the plugin alone on the path, not every benchmark's name
    (plugin / "suite_cpu_timeline.py").symlink_to(HERE / "suite_cpu_timeline.py")
    timeline = plugin / "timeline.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "",  # as the Makefile's TEST_ENV
           "SUITE_CPU_TIMELINE": str(timeline),
           "PYTHONPATH": os.pathsep.join(p for p in (str(plugin), os.environ.get("PYTHONPATH", "")) if p)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu_timeline", *(args.pytest_args or PYTEST_CORE)]

    sampler = Sampler(since=_boot_ticks_now() - TICKS,  # a tick of slack: the first child starts within it
                      marker=f"SUITE_CPU_TIMELINE={timeline}")
    total0, idle0 = _machine_ticks()
    began = time.monotonic()
    sampler.start()
    pytest = subprocess.Popen(command, cwd=ROOT, env=env)
    returncode = pytest.wait()
    wall = time.monotonic() - began
    sampler.done.set()
    sampler.join()
    total1, idle1 = _machine_ticks()

    cores = os.cpu_count() or 1
    share = (idle1 - idle0) / max(1, total1 - total0)
    rows = ours(list(sampler.rows.values()), pytest.pid)
    parents = Parents(rows)
    by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    by_test: Counter[str] = Counter()
    for r in rows:
        k = by_kind[kind(r, parents)]
        k[0] += 1
        k[1] += r["cpu"]
        by_test[r["test"] or "(no test: pytest, its workers, services)"] += r["cpu"]
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\n{' '.join(command[2:])}\nexit {returncode}; {wall:.1f} s wall on {cores} cores: "
          f"{wall * cores * (1 - share):.0f} busy and {wall * cores * share:.0f} idle core-seconds; "
          f"{len(rows)} processes started, {sum(r['cpu'] for r in rows):.0f} CPU seconds among them; "
          f"{waited.ru_utime + waited.ru_stime:.0f} of them in pytest and the processes it waited for "
          f"(what /usr/bin/time and the shell's `time` count: {100 * (waited.ru_utime + waited.ru_stime) / wall:.0f} % CPU)")
    print("\nCPU s  procs  kind")
    for name, (n, cpu) in sorted(by_kind.items(), key=lambda x: -x[1][1])[:args.top]:
        print(f"{cpu:6.1f} {n:5d}  {name}")
    print("\nCPU s  started by (test file, by PYTEST_CURRENT_TEST: a forked session counts for its template's test)")
    for name, cpu in by_test.most_common(args.top):
        print(f"{cpu:6.1f}  {name}")
    inside, children = per_file(rows, _timeline(timeline))
    files = {f: round(inside.get(f, 0.0) + children.get(f, 0.0), 1) for f in set(inside) | set(children)}
    print(f"\n CPU s  in-test  processes  test file (all {len(files)}; {sum(files.values()):.0f} CPU s)")
    for name, cpu in sorted(files.items(), key=lambda x: -x[1])[:max(args.top, 60)]:
        print(f"{cpu:6.1f}  {inside.get(name, 0.0):7.1f}  {children.get(name, 0.0):9.1f}  {name}")
    if args.json:
        args.json.write_text(json.dumps({"wall": wall, "idle_share": share, "rows": rows}, indent=0))
    if args.files_json:
        args.files_json.write_text(json.dumps({"command": " ".join(command[2:]), "wall": round(wall, 1),
                                               "cpu": round(sum(r["cpu"] for r in rows), 1),
                                               "waited_cpu": round(waited.ru_utime + waited.ru_stime, 1),
                                               "busy_core_s": round(wall * cores * (1 - share)),
                                               "idle_core_s": round(wall * cores * share), "files": files},
                                              indent=0, sort_keys=True) + "\n")
    return returncode


if __name__ == "__main__":
    sys.exit(main())
