"""Rewards that leave state behind, as a study's own reward file might: the warm session's attackers.

`disturb` changes the process state no list of restores covers (issue 43's 14 kinds: priority,
an environment variable set at the C level, CPU affinity, a resource limit, a pending alarm,
`sys.meta_path`, the garbage collector, decimal and NumPy state, the time zone, a codec, a patched
library, a thread started with `_thread`); `probe` sees all of it.

Loaded by name by the trials of tests/test_launch_fresh.py (`session_rewards:<name>`; tests/ is
on PYTHONPATH). `probe` turns what a trial can observe of its process into its reward values,
so a session that let an earlier trial's state through gives different rewards than a fresh
process; the attackers change that state, either what a session restores (`flip_restorable`)
or what it can only detect (`leave_unrestorable`, the `sys` counter, a registry that refuses a
repeat).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
import time
import warnings

import torch

CALLS = 0  # module state: a fresh process (or a forgotten module) starts at 0


def state() -> dict:
    """What a reward can see of its process, beyond its own module."""
    import huggingface_hub.constants
    import numpy
    import transformers.utils.logging as hf_logging

    dynamo = sys.modules.get("torch._dynamo")
    cuda = torch.backends.cuda
    return {
        "warning_filters": [(f[0], str(f[2])) for f in warnings.filters],
        "warning_once_cache": hf_logging.warning_once.cache_info().currsize,
        "root_logger": (logging.getLogger().level, len(logging.getLogger().handlers)),
        "transformers_logger": logging.getLogger("transformers").level,
        "user_logger": (logging.getLogger("session_rewards.user").level, len(logging.getLogger("session_rewards.user").handlers)),
        "sigusr1": repr(signal.getsignal(signal.SIGUSR1)),
        "stdout": type(sys.stdout).__name__,
        "grad": torch.is_grad_enabled(),
        "default_device": str(torch.get_default_device()),
        "anomaly": torch.is_anomaly_enabled(),
        "tf32": (cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32),
        "sdpa": (cuda.flash_sdp_enabled(), cuda.mem_efficient_sdp_enabled(), cuda.math_sdp_enabled()),
        "dynamo_frames": sum(dynamo.utils.counters["frames"].values()) if dynamo is not None else 0,
        "start_method": multiprocessing.get_start_method(allow_none=True),
        "umask": _umask(),
        "recursion_limit": sys.getrecursionlimit(),
        "hub_offline": bool(huggingface_hub.constants.HF_HUB_OFFLINE),
        "rng": (random.random(), float(numpy.random.random()), float(torch.rand(1, device="cpu"))),
        "module_calls": CALLS,
        **process_state(),
    }


_C_LEVEL = b"GRPO_ABLATE_C_LEVEL"
_LEFT_THREAD = b"left-thread"


def _libc():
    import ctypes

    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    return libc


def process_state() -> dict:
    """The process state only a fresh process resets (what `disturb` changes)."""
    import codecs
    import decimal
    import resource
    import textwrap

    import numpy

    try:
        codecs.lookup("grpo-ablate-rot")
        codec = True
    except LookupError:
        codec = False
    tasks = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm", "rb") as f:
                tasks.append(f.read().strip())
        except OSError:
            continue
    return {
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "c_env": (_libc().getenv(_C_LEVEL) or b"").decode(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
        "alarm": signal.getitimer(signal.ITIMER_REAL)[0] > 0,
        "meta_path": [type(f).__name__ for f in sys.meta_path],
        "gc": __import__("gc").isenabled(),
        "decimal": decimal.getcontext().prec,
        "numpy_err": numpy.geterr(),
        "tz": list(time.tzname),
        "codec": codec,
        "patched": getattr(textwrap.dedent, "__name__", "?"),
        "left_threads": tasks.count(_LEFT_THREAD),
    }


class _Finder:
    def find_spec(self, *args, **kwargs):
        return None


def _left_thread() -> None:
    import ctypes

    ctypes.CDLL(None).prctl(15, _LEFT_THREAD, 0, 0, 0)  # PR_SET_NAME: /proc/self/task/<tid>/comm
    time.sleep(600)


def disturb(prompts, completions, **kwargs):
    """Change, once, every kind of process state the issue names; print what a probe then sees."""
    import _thread
    import codecs
    import decimal
    import gc
    import resource
    import textwrap

    import numpy

    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        os.nice(1)
        _libc().setenv(_C_LEVEL, b"set-below-python", 1)  # os.environ never hears of it
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, cpus[:1] if len(cpus) > 1 else cpus)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 1000) - 1, hard))
        signal.signal(signal.SIGALRM, lambda *_: None)
        signal.alarm(3000)
        sys.meta_path.append(_Finder())
        gc.disable()
        decimal.getcontext().prec = 5
        numpy.seterr(under="print")
        os.environ["TZ"] = "Asia/Kathmandu"
        time.tzset()
        codecs.register(lambda name: codecs.lookup("rot13") if name.replace("-", "_") == "grpo_ablate_rot" else None)
        textwrap.dedent = lambda text: text  # a monkeypatch layer on an installed library
        _thread.start_new_thread(_left_thread, ())
        time.sleep(0.2)  # the thread names itself
        print("DISTURBED " + json.dumps(process_state(), sort_keys=True, default=str), flush=True)
    return [0.0] * len(completions)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def probe(prompts, completions, **kwargs):
    """Rewards that are a hash of the process state: equal rewards, equal state. The state goes to the log too."""
    global CALLS
    CALLS += 1
    seen = state()
    print("PROBE " + json.dumps(seen, sort_keys=True, default=str), flush=True)
    digest = hashlib.sha256(json.dumps(seen, sort_keys=True, default=str).encode()).digest()
    return [digest[i % len(digest)] / 255.0 for i in range(len(completions))]


class _Relay(io.TextIOBase):
    def __init__(self, target):
        self.target = target

    def write(self, text):
        return self.target.write(text)

    def flush(self):
        self.target.flush()


def flip_restorable(*, grad_and_device: bool = False) -> None:
    """Change every process-wide thing a warm session restores (grad mode and default device only on request:
    a reward runs under no_grad, and a trial cannot train on the meta device)."""
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.warn("once per process", UserWarning, stacklevel=1)
    import transformers.utils.logging as hf_logging

    hf_logging.get_logger("session_rewards").warning_once("a warning shown once per process")
    logging.getLogger().addHandler(logging.NullHandler())
    logging.getLogger("transformers").setLevel(logging.CRITICAL)
    user = logging.getLogger("session_rewards.user")
    user.setLevel(logging.DEBUG)
    user.addHandler(logging.NullHandler())
    signal.signal(signal.SIGUSR1, lambda *_: None)
    if not isinstance(sys.stdout, _Relay):
        sys.stdout = _Relay(sys.stdout)
    torch.set_anomaly_enabled(True)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.enable_flash_sdp(False)
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(1))
    multiprocessing.set_start_method("spawn", force=True)
    os.umask(0o077)
    sys.setrecursionlimit(4321)
    if grad_and_device:
        torch.set_grad_enabled(False)
        torch.set_default_device("meta")


def attack_restorable(prompts, completions, **kwargs):
    flip_restorable()
    return [0.0] * len(completions)


def sys_counter(prompts, completions, **kwargs):
    """The issue's attack: a count kept on `sys`, which no forgotten module resets."""
    sys.grpo_ablate_calls = getattr(sys, "grpo_ablate_calls", 0) + 1
    return [sys.grpo_ablate_calls / 10.0] * len(completions)


GRANDCHILDREN = "GRPO_ABLATE_TEST_GRANDCHILDREN"  # where leave_unrestorable writes its grandchildren's pids


def fork_grandchildren() -> None:
    """Two grandchildren whose parent exits at once: one in the trial's process group, one in a session of its own."""
    out = os.environ[GRANDCHILDREN]
    script = f'sleep 300 & echo $! >> {out}; setsid sleep 301 & echo $! >> {out}'
    subprocess.run(["sh", "-c", script], check=True)


_LEFT = []


def leave_unrestorable(prompts, completions, **kwargs):
    """Leave what no restore undoes: a thread, a descriptor, an atexit handler, a builtin, processes."""
    if not _LEFT:
        _LEFT.append(threading.Thread(target=time.sleep, args=(300,), name="left-by-a-reward", daemon=True))
        _LEFT[0].start()
        _LEFT.append(os.open(os.devnull, os.O_RDONLY))
        import atexit
        import builtins

        atexit.register(print, "bye from a reward")
        builtins.grpo_ablate_left = True
        fork_grandchildren()
    return [0.0] * len(completions)
