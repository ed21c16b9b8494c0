"""A trial is recorded as out of memory only on evidence of a type; a bare SIGKILL is retried.

    pytest tests/test_launch_oom.py                  # parsing, classification, real children, a real cgroup OOM kill
    pytest -m slow tests/test_launch_oom.py          # real trials: killed by the kernel, killed by hand

The cgroup tests make a child memory cgroup with a small limit (root, a writable cgroup v1 or
v2 memory controller); where that is not permitted they are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.launch import oom_kill_count, oom_kill_files, parse_oom_kills, run_trial
from grpo_ablate.launch import ProcessLauncher, classify
from grpo_ablate.core.vocab import Outcome
from helpers import ROOT, unavailable

V2_EVENTS = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"
V1_OOM_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"
V1_PROC = "9:name=systemd:/\n4:memory:/jobs/7\n1:cpu:/\n0::/\n"


def test_parse_oom_kills_reads_both_cgroup_versions():
    assert parse_oom_kills(V2_EVENTS) == 2  # not oom (3) nor oom_group_kill
    assert parse_oom_kills(V1_OOM_CONTROL) == 5
    assert parse_oom_kills("oom 1\n") is None and parse_oom_kills("oom_kill many\n") is None


def test_oom_kill_files_follow_proc_cgroup(tmp_path):
    assert oom_kill_files("0::/user.slice/a\n", tmp_path) == [
        tmp_path / "user.slice/a/memory.events", tmp_path / "unified/user.slice/a/memory.events"]
    assert tmp_path / "memory/jobs/7/memory.oom_control" in oom_kill_files(V1_PROC, tmp_path)
    assert oom_kill_files("5:cpu,cpuacct:/x\n", tmp_path) == []


def test_oom_kill_count_reads_the_named_cgroup_and_is_none_without_one(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text(V1_PROC)
    assert oom_kill_count(proc, tmp_path) is None  # no such folder: no evidence either way
    (tmp_path / "memory/jobs/7").mkdir(parents=True)
    (tmp_path / "memory/jobs/7/memory.oom_control").write_text(V1_OOM_CONTROL)
    assert oom_kill_count(proc, tmp_path) == 5
    assert oom_kill_count(tmp_path / "missing", tmp_path) is None


def _classify_with(tmp_path, rc, log="", oom_kill=None):
    spec = spec_from_sections(tmp_path / "t", data={"task": "addition"}, budget={"max_steps": 3})
    return classify(spec, rc, None, [], timed_out=False, stop_reason=None, log_tail=log, oom_kill=oom_kill)


def test_sigkill_is_oom_only_with_evidence(tmp_path):
    bare = _classify_with(tmp_path, -signal.SIGKILL)
    assert bare[0] is Outcome.INTERRUPTED and "killed by SIGKILL with no evidence of running out of memory" in bare[1]
    assert _classify_with(tmp_path, 137)[0] is Outcome.INTERRUPTED
    # torchrun exits 1 and names the rank's signal in its summary
    torchrun = "    exitcode  : -9 (pid: 4242)\n    error_file: <N/A>\n    traceback : Signal 9 (SIGKILL) received by PID 4242\n"
    assert _classify_with(tmp_path, 1, torchrun)[0] is Outcome.INTERRUPTED
    # the evidence: the kernel's OOM kill, or the worker's own typed record
    kernel = _classify_with(tmp_path, -signal.SIGKILL, oom_kill="oom_kill 0 -> 1")
    assert kernel[0] is Outcome.OOM and "oom_kill 0 -> 1" in kernel[1]
    # words in a log are not evidence, however much they look like an OOM
    for message in ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                    "[rank1]: MemoryError", "MemoryError: cannot allocate",
                    "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes",
                    "warning: reward MemoryErrorHandler not used", "peak_memory_mb: 812"):
        found = _classify_with(tmp_path, 1, "Traceback (most recent call last):\n" + message + "\n")
        assert found[0] is Outcome.FAILED and message[:20] in found[1], message


_PRINTS_OOM = "import sys; print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB', flush=True); sys.exit(1)"


def test_a_real_child_that_prints_an_oom_and_exits_is_failed_not_oom(tmp_path):
    """A real process, started and watched by the real launcher, prints CUDA's words and exits 1."""
    spec = spec_from_sections(tmp_path / "t", data={"task": "addition"}, budget={"max_steps": 3}, timeout_s=120)
    result = ProcessLauncher(command=lambda spec, path: [sys.executable, "-c", _PRINTS_OOM]).run(spec, poll_seconds=0.1)
    assert result.returncode == 1
    assert result.outcome is Outcome.FAILED, result.reason
    assert "CUDA out of memory" in result.reason  # the last log line is the reason, not the verdict
    assert json.loads((tmp_path / "t" / "result.json").read_text())["outcome"] == "failed"


def test_the_worker_classifies_exceptions_by_type():
    """The worker holds the exception object: MemoryError and torch's OOM types count, words do not."""
    import torch

    from grpo_ablate.trainer.worker import classify_exception, oom_evidence

    assert classify_exception(MemoryError("x"))[0] is Outcome.OOM
    assert oom_evidence(torch.OutOfMemoryError("CUDA out of memory")) == "torch.OutOfMemoryError"
    assert torch.cuda.OutOfMemoryError is torch.OutOfMemoryError
    try:  # torch's real CPU allocator failure: a RuntimeError carrying the allocator's own message
        torch.empty(2**60, dtype=torch.uint8)
    except RuntimeError as exc:
        allocator = exc
    assert classify_exception(allocator)[0] is Outcome.OOM and "CPU allocator" in oom_evidence(allocator)
    wrapped = RuntimeError("trainer step failed")
    wrapped.__cause__ = MemoryError()
    assert classify_exception(wrapped)[0] is Outcome.OOM  # the cause chain is read
    if not torch.cuda.is_available():  # no CUDA in use here: CUDA's words on an exception are not evidence
        outcome, reason = classify_exception(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))
        assert outcome is Outcome.FAILED and reason.startswith("RuntimeError")
    assert classify_exception(ValueError("MemoryError in the name"))[0] is Outcome.FAILED


# ---------------------------------------------------------------- a real cgroup


@pytest.fixture
def small_cgroup():
    """A child of this process's memory cgroup; yields (folder, set_limit). Removed afterwards."""
    files = [f for f in oom_kill_files(Path("/proc/self/cgroup").read_text()) if f.is_file()]
    if not files:
        unavailable("no readable memory cgroup for this process (/proc/self/cgroup names none under /sys/fs/cgroup)")
    counter = files[0]
    child = counter.parent / f"grpo-ablate-test-{uuid.uuid4().hex[:8]}"
    limit_name = "memory.max" if counter.name == "memory.events" else "memory.limit_in_bytes"
    try:
        child.mkdir()
    except OSError as exc:
        unavailable(f"cannot create a child cgroup under {counter.parent}: {exc}")

    def set_limit(limit: int) -> None:
        try:
            (child / limit_name).write_text(str(limit))
        except OSError as exc:
            unavailable(f"cannot set {child / limit_name}: {exc}")

    try:
        yield child, set_limit
    finally:
        for pid in (child / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for _ in range(50):
            try:
                child.rmdir()
                break
            except OSError:
                time.sleep(0.1)


_ALLOCATE = """
import os, sys
open(sys.argv[1] + "/cgroup.procs", "w").write(str(os.getpid()))
open(sys.argv[2], "w").write(open("/proc/self/cgroup").read())
blocks = []
while True:
    blocks.append(bytearray(8 << 20))
"""


def test_a_real_kernel_oom_kill_is_counted(small_cgroup, tmp_path):
    child, set_limit = small_cgroup
    set_limit(64 << 20)
    proc_cgroup = tmp_path / "cgroup"
    done = subprocess.run([sys.executable, "-c", _ALLOCATE, str(child), str(proc_cgroup)], timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert oom_kill_count(proc_cgroup) == 1  # a fresh cgroup, one kill


_TRIAL_IN_CGROUP = """
import json, os, sys
open(sys.argv[1] + "/cgroup.procs", "w").write(str(os.getpid()))  # before anything is imported
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.launch import run_trial
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
spec = spec_from_sections(sys.argv[2], data={"task": "addition", "num_prompts": 200}, trainer=dict(TINY_CPU_TRAINER),
                          budget={"max_steps": 3}, timeout_s=300)
result = run_trial(spec)
print(json.dumps({"outcome": result.outcome.value, "reason": result.reason}))
"""


@pytest.mark.slow
def test_a_trial_killed_by_the_kernel_oom_killer_is_oom(small_cgroup, tmp_path):
    """The orchestrator (~40 MB) and its trial share a 200 MB cgroup: the trial's imports
    outgrow it and the kernel kills the largest process, the trial."""
    child, set_limit = small_cgroup
    set_limit(200 << 20)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", _TRIAL_IN_CGROUP, str(child), str(tmp_path / "t")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcome"] == "oom", result
    assert "OOM killer" in result["reason"]
    assert json.loads((tmp_path / "t" / "result.json").read_text())["outcome"] == "oom"


# ---------------------------------------------------------------- a real SIGKILL


@pytest.mark.slow
def test_a_sigkilled_running_trial_is_interrupted_not_oom(tmp_path):
    """Killed by hand (or by anything but the OOM killer) while it trains: retried, not OOM."""
    from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
    from grpo_ablate.trainer.session import FORKED_SESSION_NAME

    spec = spec_from_sections(tmp_path / "t", data={"task": "addition", "num_prompts": 2000}, trainer=dict(TINY_CPU_TRAINER),
                              budget={"max_steps": 100_000}, timeout_s=600)
    killed: list[int] = []
    earlier = {c.pid for c in psutil.Process().children(recursive=True)}  # e.g. the suite's warm session: not this trial

    def kill_on_first_step(row: dict) -> None:
        if killed:
            return
        for child in psutil.Process().children(recursive=True):
            if child.pid not in earlier and (child.name() == FORKED_SESSION_NAME
                                             or "grpo_ablate.trainer.worker" in " ".join(child.cmdline())):
                child.send_signal(signal.SIGKILL)
                killed.append(child.pid)

    result = run_trial(spec, on_progress=kill_on_first_step)
    assert killed, result.log_tail
    assert result.outcome is Outcome.INTERRUPTED, f"{result.reason}\n{result.log_tail}"
    assert "killed by SIGKILL with no evidence of running out of memory" in result.reason
    assert result.returncode == -signal.SIGKILL
    assert json.loads((tmp_path / "t" / "result.json").read_text())["outcome"] == "interrupted"
