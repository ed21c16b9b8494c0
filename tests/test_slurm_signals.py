"""How a scheduler's signals end a trial: SIGTERM is one graceful stop, and a trial ended from outside is interrupted.

SLURM ends a job (scancel, preemption, the time limit) with SIGTERM to every process of it at
once, then SIGKILL. The trial's handler (trainer/signals.py) turns the first SIGTERM into a STOP
file, the orchestrator counts SIGTERMs apart from Ctrl-Cs (study/runner.py `kills`), and the
classification (launchers/outcome.py) reads the exit status and the STOP file. The same on a real
cluster: tests/test_slurm_faults.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from helpers import tiny_spec

from grpo_ablate.study.runner import kills
from grpo_ablate.launch import classify, finish
from grpo_ablate.core.vocab import STOP_FILE, Outcome

# A process that installs the handler for `trial_dir` (argv[1], "-" for none), says so, and waits
# up to 60 s for a STOP file, then exits 0: a trial that checks STOP at the end of each step.
CHILD = """
import sys, time
from pathlib import Path
from grpo_ablate.trainer.signals import stop_on_sigterm
folder = None if sys.argv[1] == "-" else Path(sys.argv[1])
stop_on_sigterm(folder)
print("ready", flush=True)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    if folder is not None and (folder / "STOP").exists():
        time.sleep(1.0)  # the rest of the step: a second SIGTERM arrives meanwhile and must change nothing
        print("stopped", flush=True)
        sys.exit(0)
    time.sleep(0.05)
sys.exit(5)
"""


@pytest.mark.parametrize("returncode", [-signal.SIGTERM, 128 + signal.SIGTERM, -signal.SIGKILL, 128 + signal.SIGKILL])
def test_a_trial_ended_by_sigterm_or_sigkill_without_a_result_is_interrupted(tmp_path, returncode):
    spec = tiny_spec(tmp_path)
    outcome, reason = classify(spec, returncode, None, [], timed_out=False, stop_reason=None, log_tail="")
    assert outcome is Outcome.INTERRUPTED and str(returncode) in str(reason)


def test_other_exits_without_a_result_still_fail_and_log_text_is_never_read_as_a_signal(tmp_path):
    spec = tiny_spec(tmp_path)
    outcome, _ = classify(spec, 1, None, [], timed_out=False, stop_reason=None, log_tail="Terminated\nexit 143")
    assert outcome is Outcome.FAILED


def test_the_stop_file_the_trial_wrote_itself_is_read_when_its_process_ended_without_a_result(tmp_path):
    spec = tiny_spec(tmp_path)
    spec.path.mkdir(parents=True, exist_ok=True)
    (spec.path / STOP_FILE).write_text("interrupted\n")  # its SIGTERM handler's, before the parent polled
    log = spec.path / "log.txt"
    log.write_text("")
    result = finish(spec, 1, timed_out=False, stop_reason=None, log_path=log)
    assert result.outcome is Outcome.INTERRUPTED


def _child(arg: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, arg], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_two_sigterms_are_one_graceful_stop(tmp_path):
    proc = _child(str(tmp_path))
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    while not (tmp_path / STOP_FILE).exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # within the step's remaining second: a forwarded TERM, the orchestrator's
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "stopped" in out
    assert (tmp_path / STOP_FILE).read_text() == "interrupted\n"


def test_a_stop_already_asked_for_is_kept(tmp_path):
    (tmp_path / STOP_FILE).write_text("pruned\n")
    proc = _child(str(tmp_path))
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 0 and (tmp_path / STOP_FILE).read_text() == "pruned\n"


def test_without_a_trial_sigterm_ends_the_process_as_its_default_would():
    proc = _child("-")
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM


def test_only_a_second_ctrl_c_kills_the_running_trials():
    assert not kills(first=True, new_interrupts=0)  # a SIGTERM: a graceful stop
    assert not kills(first=False, new_interrupts=0)  # another SIGTERM (SLURM's, then the script's): still one stop
    assert not kills(first=True, new_interrupts=1)  # the first Ctrl-C
    assert kills(first=False, new_interrupts=1)  # Ctrl-C once a stop was asked for
    assert kills(first=True, new_interrupts=2)

