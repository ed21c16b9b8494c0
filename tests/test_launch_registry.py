"""One registry of launchers, the one list of the names `hardware.launcher` may take, and launchers that assume this host only where they say so.

    pytest tests/test_launch_registry.py
"""

from __future__ import annotations

import json
import os

import pytest

from grpo_ablate.config.schema import HardwareSection
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.launch import (LAUNCHERS, Capabilities, Launcher, LauncherPool, LocalLauncher, launcher_name,
                                registry, trial_environment)
from grpo_ablate.commands.common import load_study
from grpo_ablate.launch.devices import remote_launcher
from grpo_ablate.launch.registry import launcher_choices
from grpo_ablate.contract.env import PARENT_PID_ENV
from helpers import ROOT, cli_inprocess


def test_every_registered_launcher_is_a_launcher_and_a_valid_name():
    assert all(issubclass(kind, Launcher) for kind in LAUNCHERS.values())
    assert launcher_choices() == ["auto", *LAUNCHERS]


def test_an_unknown_launcher_in_the_environment_is_refused_when_the_study_loads(monkeypatch, capsys):
    """validate (and plan, run) say it before anything starts, not the first trial's launch."""
    from grpo_ablate.commands.cli import main

    monkeypatch.setenv("GRPO_ABLATE_LAUNCHER", "kubernetes")
    assert main(["validate", str(ROOT / "studies/tiny-cpu.yaml")]) == 2
    err = capsys.readouterr()
    assert "GRPO_ABLATE_LAUNCHER='kubernetes' names no launcher: use one of ['auto', 'warm', 'process', 'slurm']" in err.out + err.err
    assert main(["plan", str(ROOT / "studies/tiny-cpu.yaml")]) == 2
    assert "GRPO_ABLATE_LAUNCHER='kubernetes' names no launcher" in capsys.readouterr().err
    # with the file's own problems: one list, every problem at once
    assert main(["validate", str(ROOT / "studies/tiny-cpu.yaml"), "--set", "budget.max_steps=0"]) == 2
    err = capsys.readouterr().err
    assert "budget.max_steps" in err and "GRPO_ABLATE_LAUNCHER='kubernetes'" in err
    monkeypatch.setenv("GRPO_ABLATE_LAUNCHER", "Process")  # the launchers read it case-blind, so validate does too
    assert main(["validate", str(ROOT / "studies/tiny-cpu.yaml")]) == 0


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_an_unknown_hardware_launcher_is_refused_at_its_key_with_the_registrys_choices(command):
    code, out, err = cli_inprocess(command, str(ROOT / "studies/tiny-cpu.yaml"), "--set", "hardware.launcher=kubernetes")
    assert code == 2 and out == ""
    assert ("hardware.launcher: 'kubernetes' names no launcher: use one of ['auto', 'warm', 'process', 'slurm']"
            in err), err


class _Elsewhere(Launcher):
    """A launcher on another node, as SLURM's would be: only the four methods."""

    def start(self, spec, env, log_path):  # pragma: no cover - never started here
        raise NotImplementedError

    def poll(self):  # pragma: no cover
        return None

    def stop(self):  # pragma: no cover
        pass


class _Nearby(_Elsewhere):
    """A launcher this repository does not ship: registered by a test with one line, nothing else edited."""

    capabilities = Capabilities(local_processes=False, cgroup_oom=False, remote=True, auto=True)

    @classmethod
    def chosen_by_auto(cls, spec, *, probe=False):
        return spec.hardware.gpus == 7  # a trial shape no shipped launcher is told apart by


def test_run_study_refuses_an_unknown_launcher_before_it_creates_anything(tmp_path):
    """The Python API (config's load_study, then run_study) skips the command's check: run_study makes it."""
    from grpo_ablate.config import load_study as load_study_file
    from grpo_ablate.plan.run_plan import resolve_plan
    from grpo_ablate.study.runner import run_study

    out = tmp_path / "out"
    study = load_study_file(ROOT / "studies" / "tiny-cpu.yaml", [f"output_dir={out}", "hardware.launcher=nope"])
    result = run_study(study, resolve_plan(study), say=lambda _: None, warn=lambda _: None)
    assert result.refused is not None and "hardware.launcher" in result.refused and "'warm'" in result.refused
    assert not out.exists()


def test_a_new_launcher_is_one_class_and_one_registry_line(monkeypatch, tmp_path):
    """Registered in LAUNCHERS, its name validates, is documented, and is the one chosen; before, it is refused."""
    study = str(ROOT / "studies/tiny-cpu.yaml")
    assert cli_inprocess("validate", study, "--set", "hardware.launcher=nearby")[0] == 2
    monkeypatch.setitem(LAUNCHERS, "nearby", _Nearby)  # the one registry line
    assert launcher_choices()[-1] == "nearby"
    code, out, err = cli_inprocess("validate", study, "--set", "hardware.launcher=Nearby")
    assert code == 0, err
    code, out, _ = cli_inprocess("explain", "hardware.launcher")
    assert code == 0 and '"nearby"' in out
    nearby = load_study(study, ["hardware.launcher=nearby"])  # its capabilities, not its name, say it is remote
    assert remote_launcher(nearby) and not remote_launcher(load_study(study, ["hardware.launcher=process"]))
    code, out, _ = cli_inprocess("schema")
    assert code == 0 and json.loads(out)["$defs"]["HardwareSection"]["properties"]["launcher"]["enum"][-1] == "nearby"
    spec = spec_from_sections(tmp_path / "t", data={"task": "addition"}, trainer={}, budget={"max_steps": 1},
                              hardware={"launcher": "nearby"})
    assert launcher_name(spec) == "nearby"
    with LauncherPool() as pool:
        assert isinstance(pool.for_spec(spec), _Nearby)
    # auto asks it in registry order, as it asks the shipped ones
    asked_first = {"nearby": _Nearby, **{k: v for k, v in LAUNCHERS.items() if k != "nearby"}}
    monkeypatch.setattr(registry, "LAUNCHERS", asked_first)
    auto = spec_from_sections(tmp_path / "a", data={"task": "addition"}, trainer={}, budget={"max_steps": 1},
                              hardware={"gpus": 7})
    assert launcher_name(auto) == "nearby"
    assert launcher_name(spec_from_sections(tmp_path / "b", data={"task": "addition"}, trainer={},
                                            budget={"max_steps": 1}, hardware={"gpus": 1})) != "nearby"


def test_the_old_command_values_of_hardware_launcher_say_where_they_moved():
    with pytest.raises(ValueError, match="write `command: torchrun`"):
        HardwareSection(launcher="torchrun")
    assert HardwareSection(launcher=" Warm ").launcher == "warm"
    assert HardwareSection(command="torchrun", launcher="process").command == "torchrun"


def test_a_launcher_elsewhere_gets_no_same_host_assumption(tmp_path):
    spec = spec_from_sections(tmp_path / "t", data={"task": "addition"}, trainer={}, budget={"max_steps": 1})
    elsewhere = _Elsewhere()
    env = elsewhere.environment(spec)
    assert PARENT_PID_ENV not in env  # its worker would end at once, watching a pid of another machine
    assert set(env) == set(trial_environment(spec)) and "PYTHONPATH" not in set(env) - set(os.environ)
    assert elsewhere.oom_evidence(elsewhere.oom_marker()) is None  # this host's cgroup says nothing about that node
    local = LocalLauncher.environment(elsewhere, spec)  # what ProcessLauncher and WarmSession send
    assert local[PARENT_PID_ENV] == str(os.getpid()) and local["PYTHONPATH"]


def test_lent_launchers_serve_one_thread_at_a_time_and_come_back_when_it_is_done(tmp_path):
    """lend_launchers: a study's worker thread (launcher_for) holds the lent pool until it is released;
    a thread asking meanwhile gets a pool of its own; the next thread after the release gets the lent one."""
    import threading

    from grpo_ablate.launch import (LauncherPool, WarmSession, launcher_for, lend_launchers,
                                               release_thread_launchers)

    spec = spec_from_sections(tmp_path / "t", model={"name_or_path": "builtin:tiny"}, data={"task": "addition"},
                              trainer={}, budget={"max_steps": 1}, hardware={"num_processes": 1},
                              env={"CUDA_VISIBLE_DEVICES": ""})
    lent = WarmSession()  # never started: no trial runs here
    got: dict[str, object] = {}
    asked, hold = threading.Event(), threading.Event()

    def worker(name: str, holds: bool = False) -> None:
        got[name] = launcher_for(spec)
        if holds:
            asked.set()
            hold.wait(30)
        release_thread_launchers()

    def thread(name: str, holds: bool = False) -> threading.Thread:
        t = threading.Thread(target=worker, args=(name, holds))
        t.start()
        return t

    with lend_launchers(LauncherPool(launchers={"warm": lent})):
        first = thread("first", holds=True)
        assert asked.wait(30)
        thread("meanwhile").join(30)
        hold.set()
        first.join(30)
        thread("after").join(30)
        with pytest.raises(RuntimeError, match="already lent"):
            with lend_launchers(LauncherPool()):
                pass
    thread("unlent").join(30)
    assert got["first"] is lent and got["after"] is lent
    assert isinstance(got["meanwhile"], WarmSession) and got["meanwhile"] is not lent
    assert isinstance(got["unlent"], WarmSession) and got["unlent"] is not lent
