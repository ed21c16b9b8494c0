"""Warm sessions forked from a template: a real template process, its sessions, their ends.

    pytest tests/test_launch_template.py

Whether a forked session trains exactly as a fresh process does is the warm-session tests'
question (test_launch_warm.py, test_launch_fresh.py): every session there is forked. Here: the
template's own contract (one template per startup key, sessions below it, exit statuses as
Popen gives them, a template that is gone replaced, the opt-out, the cache's bound).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from grpo_ablate.launch import template as template_module
from grpo_ablate.launch.template import TEMPLATE_ENV, ForkedSession, start_session

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork server: Linux only")

ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
KEY = ("test_launch_template", "key")
SHIPPED_KEEP = template_module.KEEP_TEMPLATES  # the bound a process keeps (the bound's own test pins it)


@pytest.fixture(scope="module", autouse=True)
def _templates_of_this_module():
    """End the templates this module started; the ones the suite's warm sessions started before stay for
    the tests after this module (another would cost them an interpreter's imports, ~5 CPU s).

    The module's own template (KEY) gets a place of its own in the cache while the module runs: with the
    bound at its shipped 2 and two of the worker's templates kept already (the suite's warm session's and
    one of another startup environment), KEY's start would evict the older idle one, and the next warm
    trial of its environment after this module would start it again."""
    before = set(template_module._templates)
    keep = pytest.MonkeyPatch()
    keep.setattr(template_module, "KEEP_TEMPLATES", SHIPPED_KEEP + 1)
    yield
    keep.undo()
    with template_module._templates_lock:
        ours = [template_module._templates.pop(key) for key in list(template_module._templates) if key not in before]
    for template in ours:
        template.close()


def _answer_for(proc, request: dict, seconds: float = 120.0) -> dict:
    """Send a session one request line and read its answer line."""
    proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    line = proc.stdout.readline()
    assert line, "the session ended without an answer"
    return json.loads(line)


def test_sessions_fork_from_one_template_per_key_and_report_their_ends(tmp_path):
    first, why = start_session(KEY, ENV, tmp_path / "first.log")
    second, why_second = start_session(KEY, ENV, tmp_path / "second.log")
    assert why is None and why_second is None
    assert isinstance(first, ForkedSession) and isinstance(second, ForkedSession)
    template = psutil.Process(first.pid).parent()
    assert template.pid == psutil.Process(second.pid).parent().pid != os.getpid()  # one template, not this process
    assert "--template" in template.cmdline()
    assert os.getpgid(first.pid) == first.pid  # a process group of its own: kill_tree signals the whole tree
    assert first.poll() is None and second.poll() is None

    first.stdin.close()  # EOF: a session with nothing to do exits 0
    assert first.wait(timeout=60) == 0 and first.returncode == 0
    with pytest.raises(subprocess.TimeoutExpired):
        second.wait(timeout=0.5)  # it waits for a request
    os.kill(second.pid, signal.SIGKILL)
    assert second.wait(timeout=60) == -signal.SIGKILL  # Popen's convention for a signal


def test_a_session_takes_its_working_folder_and_log_and_the_template_does_not_run_it(tmp_path, monkeypatch):
    """A bad spec path fails the session's first trial in the session: its log says so, not the template's."""
    log = tmp_path / "session.log"
    monkeypatch.chdir(tmp_path)  # the template was started elsewhere
    proc, _ = start_session(KEY, ENV, log)
    deadline = time.monotonic() + 30  # the child changes folder just after the fork that gave its pid
    while psutil.Process(proc.pid).cwd() != str(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert psutil.Process(proc.pid).cwd() == str(tmp_path)
    proc.stdin.write(b'{"spec": "/nonexistent/spec.json", "env": {}}\n')
    proc.stdin.close()
    assert proc.wait(timeout=60) != 0
    assert "nonexistent" in log.read_text()


def test_a_template_that_is_gone_is_replaced(tmp_path):
    proc, _ = start_session(KEY, ENV, tmp_path / "a.log")
    template = psutil.Process(proc.pid).parent()
    template.kill()
    assert proc.wait(timeout=60) == -signal.SIGKILL  # it dies with its template, and says so
    deadline = time.monotonic() + 30
    while template_module._templates[KEY].gone is False and time.monotonic() < deadline:
        time.sleep(0.1)
    again, why = start_session(KEY, ENV, tmp_path / "b.log")
    assert why is None and psutil.Process(again.pid).parent().pid != template.pid
    again.stdin.close()
    assert again.wait(timeout=60) == 0


def _wait_until(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the event never came"
        time.sleep(0.05)


def test_a_stopped_template_is_detected_and_replaced_not_waited_on(tmp_path):
    """Issue 52: a SIGSTOPped template answers no fork and reports no end; the next session comes from a new one."""
    proc, _ = start_session(KEY, ENV, tmp_path / "a.log")
    template = psutil.Process(proc.pid).parent()
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    template.suspend()  # SIGSTOP
    _wait_until(lambda: template.status() == psutil.STATUS_STOPPED)
    started = time.monotonic()
    again, why = start_session(KEY, ENV, tmp_path / "b.log")
    assert why is None and psutil.Process(again.pid).parent().pid != template.pid
    assert time.monotonic() - started < template_module.REPLY_SECONDS / 2  # replaced at once, not after a timeout
    template.wait(timeout=30)  # the stopped one was ended (SIGKILL reaches a stopped process)
    again.stdin.close()
    assert again.wait(timeout=60) == 0


def test_a_session_whose_template_stops_is_reported_killed_and_kill_tree_returns(tmp_path):
    """A session forked from a template that is then stopped: its end can never be reported, so the wait ends the
    template (and with it the session) instead of waiting for ever; kill_tree, which waits last, returns."""
    from grpo_ablate.launch.process import kill_tree

    proc, _ = start_session(KEY, ENV, tmp_path / "a.log")  # from the template the test above started
    template = psutil.Process(proc.pid).parent()
    template.suspend()
    _wait_until(lambda: template.status() == psutil.STATUS_STOPPED)
    started = time.monotonic()
    assert kill_tree(proc, grace=1.0) is True and proc.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 60
    template.wait(timeout=30)
    assert template_module._templates[KEY].gone  # the next session's start replaces it (the test above)


def test_the_opt_out_starts_a_session_on_its_own(tmp_path):
    log = tmp_path / "own.log"
    proc, why = start_session(("own",), {**ENV, TEMPLATE_ENV: "0"}, log)
    try:
        assert why == f"{TEMPLATE_ENV}=0" and isinstance(proc, subprocess.Popen)
        assert psutil.Process(proc.pid).parent().pid == os.getpid()
    finally:
        proc.kill()  # before its imports: nothing here needs it to serve
        proc.wait(timeout=60)


class _Stand:
    """A template's cache-facing side only (busy, gone, close): the bound is the cache's own logic."""

    def __init__(self, env: dict) -> None:
        self.busy, self.gone, self.closed, self.stopped = False, False, False, False

    def close(self) -> None:
        self.closed = True


def test_the_process_keeps_at_most_two_templates_and_never_one_with_live_sessions(monkeypatch):
    assert SHIPPED_KEEP == 2
    monkeypatch.setattr(template_module, "KEEP_TEMPLATES", SHIPPED_KEEP)  # the shipped bound, not the module's room
    monkeypatch.setattr(template_module, "_templates", type(template_module._templates)())
    monkeypatch.setattr(template_module, "SessionTemplate", _Stand)
    a = template_module._template_for("a", {})
    a.busy = True
    b = template_module._template_for("b", {})
    c = template_module._template_for("c", {})
    assert not a.closed and b.closed and not c.closed  # the oldest idle one went; the busy one stays
    assert list(template_module._templates) == ["a", "c"]
    a.busy = False
    template_module._template_for("d", {})
    assert a.closed and list(template_module._templates) == ["c", "d"]
    c.gone = True
    assert template_module._template_for("c", {}) is not c and c.closed  # a dead template is replaced
    d = template_module._templates["d"]
    d.stopped = True
    assert template_module._template_for("d", {}) is not d and d.closed  # and so is a stopped one


def test_a_session_that_could_see_a_gpu_is_never_forked(tmp_path):
    """CUDA started by an import in the template would not survive the fork: such sessions start on their own."""
    gpus = tmp_path / "gpus"
    gpus.mkdir()
    assert not template_module._gpus_visible({}, driver=str(gpus))  # a driver folder, no GPU in it
    (gpus / "0000:00:04.0").mkdir()
    assert template_module._gpus_visible({}, driver=str(gpus))
    assert template_module._gpus_visible({"CUDA_VISIBLE_DEVICES": "0"}, driver=str(gpus))
    assert not template_module._gpus_visible({"CUDA_VISIBLE_DEVICES": ""}, driver=str(gpus))  # a CPU trial
    assert not template_module._gpus_visible({}, driver=str(tmp_path / "no-driver"))


_EXITING_PARENT = """
import psutil
from helpers import tiny_spec
from grpo_ablate.launch import WarmSession
import sys
from pathlib import Path
with WarmSession() as session:
    result = session.run(tiny_spec(Path(sys.argv[1]), steps=1))
assert result.outcome.value == "completed", result.reason
(template,) = [p for p in psutil.Process().children() if "--template" in p.cmdline()]
times = template.cpu_times()
print(times.user + times.system + times.children_user + times.children_system, flush=True)
"""


def test_a_process_waits_for_its_templates_when_it_exits(tmp_path):
    """A run that exits ends its templates and reaps them, so its own parent's rusage counts their CPU and their
    sessions' (/usr/bin/time, the shell's `time`): left to die with it they were reaped by init, and a warm
    trial's CPU was nobody's (benchmarks/suite_cpu.py measured a third of four test files' CPU counted)."""
    import resource

    from helpers import ROOT, TESTS

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    before = children_cpu()
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    done = subprocess.run([sys.executable, "-c", _EXITING_PARENT, str(tmp_path / "trial")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    template_cpu = float(done.stdout.split()[-1])  # its imports and the session it reaped, read while it was alive
    assert template_cpu > 1.0  # torch, transformers and TRL: seconds
    assert children_cpu() - before >= template_cpu  # the template's CPU reached this process: it was waited for
