"""CPU threads are split over every trial on the host, across processes (issue 9, B10).

Real processes hold real `flock` slots in a private cache folder; nothing is mocked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from grpo_ablate.launch.devices import claim_cpu_share

HOLDER = """
import sys
from grpo_ablate.launch.devices import claim_cpu_share
share = claim_cpu_share(workers=1, cores=8)
print(share.threads, share.running, flush=True)
sys.stdin.readline()  # hold the slot until told
share.release()
"""


def _holder(cache) -> subprocess.Popen:
    env = dict(os.environ, GRPO_ABLATE_CACHE=str(cache))
    return subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def test_two_processes_split_the_cores(tmp_path):
    first = _holder(tmp_path)
    assert first.stdout.readline().split() == ["8", "1"]  # alone on the host: every core
    second = _holder(tmp_path)
    try:
        assert second.stdout.readline().split() == ["4", "2"]  # the other process's trial counts
    finally:
        for p in (first, second):
            p.communicate("\n", timeout=60)
    third = _holder(tmp_path)  # both released their slots on exit
    assert third.stdout.readline().split() == ["8", "1"]
    third.communicate("\n", timeout=60)


def test_a_killed_process_leaves_no_slot_behind(tmp_path):
    victim = _holder(tmp_path)
    assert victim.stdout.readline().split() == ["8", "1"]
    victim.kill()
    victim.wait(timeout=30)
    share = claim_cpu_share(workers=1, cores=8, directory=tmp_path / "slots")
    try:
        assert (share.threads, share.running) == (8, 1)
    finally:
        share.release()


def test_a_process_s_own_workers_share_the_cores_from_the_first_trial(tmp_path):
    slots = tmp_path / "slots"
    a = claim_cpu_share(workers=2, cores=8, directory=slots)
    b = claim_cpu_share(workers=2, cores=8, directory=slots)
    c = claim_cpu_share(workers=2, cores=8, world_size=2, directory=slots)
    try:
        assert (a.threads, b.threads, c.threads) == (4, 4, 1)  # c: 3 trials x 2 processes on 8 cores
        assert a.env() == {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}
    finally:
        for s in (a, b, c):
            s.release()


def _private_slots(cache: Path) -> Path:
    """A cache folder whose CPU slots are its own and whose built models and TRL defaults are the suite's: the test
    counts slots, and a trial in an empty cache would first build the built-in model (a 400-step warm start) and ask
    a child process for GRPOConfig's defaults, work this test throws away."""
    from grpo_ablate.trainer.builtin.model import cache_root

    cache.mkdir(parents=True, exist_ok=True)
    (cache / "models").symlink_to(cache_root() / "models", target_is_directory=True)
    for known in cache_root().glob("grpo_config_*.json"):
        shutil.copy(known, cache / known.name)
    return cache


@pytest.mark.usefixtures("addition_model")  # built in the suite's cache, which the run-one's folder links to
def test_run_one_holds_a_slot_beside_a_run_and_gives_it_back(tmp_path):
    """issue 23, item 12: a real run-one beside a trial holding a slot shares the cores, then releases its slot."""
    import signal
    import time

    from helpers import cli_env
    from grpo_ablate.launch.devices import _count_held

    _private_slots(tmp_path)
    holder = _holder(tmp_path)  # a `run` trial on the same host
    assert holder.stdout.readline().split() == ["8", "1"]
    folder = tmp_path / "one"
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "run-one", "studies/tiny-cpu.yaml", "--set", "num_generations=2",
                             "--set", "budget.max_steps=100000", "--set", f"study.output_dir={tmp_path / 'out'}",
                             "--trial-dir", str(folder)], cwd=ROOT, env=cli_env(GRPO_ABLATE_CACHE=str(tmp_path)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (folder / "spec.json").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert (folder / "spec.json").exists(), proc.communicate(timeout=60)
        spec = __import__("json").loads((folder / "spec.json").read_text())
        cores = len(os.sched_getaffinity(0))
        assert spec["env"]["OMP_NUM_THREADS"] == str(max(1, cores // 2))  # two holders: the run's and its own
        assert _count_held(tmp_path / "slots") == 2
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, out + err
    assert _count_held(tmp_path / "slots") == 1  # its slot went with it; the run's is still held
    holder.communicate("\n", timeout=60)
