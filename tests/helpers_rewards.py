"""Reward functions the tests' trials load by name as `helpers_rewards:<name>` (tests/ is on PYTHONPATH).

The one module of test rewards, kept apart from helpers.py so a trial process imports nothing
else of the tests. They are real rewards run by the real trainer: the first ones misbehave on
purpose, the custom ones below behave as a user's would.
"""

from __future__ import annotations

import time


def oom_for_large_groups(prompts, completions, **kwargs):
    """Raises MemoryError when groups hold 8 or more completions, as a too-large G would on a GPU."""
    group = len(prompts) // max(1, len({str(p) for p in prompts}))
    if group >= 8:
        raise MemoryError(f"simulated: {len(completions)} completions in groups of {group} do not fit")
    return [0.0] * len(completions)


def always_raises(prompts, completions, **kwargs):
    raise ValueError("always_raises: this reward is broken on purpose")


def wrong_length(prompts, completions, **kwargs):
    return [0.0] * (len(completions) + 1)



def pause(prompts, completions, **kwargs):
    """Sleeps PAUSE_S at every call and scores nothing (give it weight 0.0 beside the task reward).

    For a real trial that must last some seconds of wall time whatever the machine's speed, where what is
    tested is the launcher around it: it trains fewer steps in that time and spends most of it asleep, not
    on a core the other test worker needs (tests/test_slurm_client.py: 40 s of training, ~35 CPU s without it)."""
    time.sleep(PAUSE_S)
    return [0.0] * len(completions)


PAUSE_S = 0.25


# ------------------------------------------------------------------ well-behaved custom rewards


def solution_length(prompts, completions, **kwargs):
    """A well-behaved custom reward: reads a dataset column, returns one float per completion."""
    return [float(len(str(s))) / 10 for s in kwargs["solution"]]


async def async_exact(prompts, completions, **kwargs):
    """An async reward: TRL runs these concurrently; the wrapper must keep it async."""
    return [1.0 if str(c).strip() == str(a) else 0.0 for c, a in zip(completions, kwargs["answer"])]


async def async_short(prompts, completions, **kwargs):
    return [0.0]


def raises_for_large_batches(prompts, completions, **kwargs):
    """A reward that breaks on generation batches above 16 completions (not a memory error)."""
    if len(completions) > 16:
        raise ValueError(f"raises_for_large_batches: {len(completions)} completions is more than it handles")
    return [0.0] * len(completions)


def all_none(prompts, completions, **kwargs):
    """Abstains on everything: fine beside a reward that scores, a broken trial alone."""
    return [None] * len(completions)


def all_nan(prompts, completions, **kwargs):
    return [float("nan")] * len(completions)


def one_inf(prompts, completions, **kwargs):
    return [1.0] * (len(completions) - 1) + [float("inf")]


async def async_all_none(prompts, completions, **kwargs):
    return [None] * len(completions)


def half_none(prompts, completions, **kwargs):
    """Scores every other completion (by its position), abstains on the rest: alone, half the rows are
    unscorable, which TRL leaves out of the group's baseline (the zero-weight recorder must not score them)."""
    return [None if i % 2 else i / 100.0 for i in range(len(completions))]


def position_tiebreak(prompts, completions, **kwargs):
    """A tiny reward that differs for every completion of a group (its position in the batch): added
    to the task's 0/1 reward, no group ever has zero spread (the dynamic-sampling equivalence)."""
    return [i / 1000.0 for i in range(len(completions))]


# ------------------------------------------------------------------ a reward that leaves processes behind

_spawned = False


def spawn_orphans(prompts, completions, **kwargs):
    """At its first call, starts three processes that try to outlive the trial: a Popen child in a session of
    its own, a daemon's double fork (its middle process exits), and a forked copy of this process that calls
    setsid. Their pids are appended to the file named by ORPHAN_PIDS_FILE (tests/test_launch_orphans.py)."""
    import os
    import subprocess
    import sys

    global _spawned
    if not _spawned:
        _spawned = True
        pids = []
        pids.append(subprocess.Popen(["sleep", "600"], start_new_session=True).pid)
        double = subprocess.run(["sh", "-c", "setsid sleep 601 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
        pids.append(int(double.stdout.split()[0]))
        child = os.fork()
        if child == 0:  # the forked copy: its own session, then it just lives on
            os.setsid()
            import time

            time.sleep(600)
            os._exit(0)
        pids.append(child)
        with open(os.environ["ORPHAN_PIDS_FILE"], "a") as f:
            f.write(" ".join(map(str, pids)) + "\n")
        sys.stdout.flush()
    return [0.0] * len(completions)
