"""One registry of launchers, one config key naming them, and launchers that assume this host only where they say so.

    pytest tests/test_launch_registry.py
"""

from __future__ import annotations

import os
import typing

import pytest

from grpo_ablate.config.schema import HardwareSection
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.trainer.launchers import LAUNCHERS, Launcher, LocalLauncher, trial_environment
from grpo_ablate.trainer.worker import PARENT_PID_ENV
from helpers import ROOT


def test_hardware_launcher_names_exactly_the_registry():
    choices = typing.get_args(HardwareSection.model_fields["launcher"].annotation)
    assert set(choices) == {"auto", *LAUNCHERS}, "add a new launcher's name to config/schema.py's hardware.launcher"
    assert all(issubclass(kind, Launcher) for kind in LAUNCHERS.values())


def test_an_unknown_launcher_in_the_environment_is_refused_when_the_study_loads(monkeypatch, capsys):
    """validate (and plan, run) say it before anything starts, not the first trial's launch."""
    from grpo_ablate.commands.cli import main

    monkeypatch.setenv("GRPO_ABLATE_LAUNCHER", "slurm")
    assert main(["validate", str(ROOT / "studies/tiny-cpu.yaml")]) == 2
    err = capsys.readouterr()
    assert "GRPO_ABLATE_LAUNCHER='slurm' names no launcher: use one of ['auto', 'process', 'warm']" in err.out + err.err
    monkeypatch.setenv("GRPO_ABLATE_LAUNCHER", "Process")  # the launchers read it case-blind, so validate does too
    assert main(["validate", str(ROOT / "studies/tiny-cpu.yaml")]) == 0


def test_the_old_command_values_of_hardware_launcher_say_where_they_moved():
    with pytest.raises(ValueError, match="write `command: torchrun`"):
        HardwareSection(launcher="torchrun")
    assert HardwareSection(command="torchrun", launcher="process").command == "torchrun"


class _Elsewhere(Launcher):
    """A launcher on another node, as SLURM's would be: only the four methods."""

    def start(self, spec, env, log_path):  # pragma: no cover - never started here
        raise NotImplementedError

    def poll(self):  # pragma: no cover
        return None

    def stop(self):  # pragma: no cover
        pass


def test_a_launcher_elsewhere_gets_no_same_host_assumption(tmp_path):
    spec = spec_from_sections(tmp_path / "t", data={"task": "addition"}, trainer={}, budget={"max_steps": 1})
    elsewhere = _Elsewhere()
    env = elsewhere.environment(spec)
    assert PARENT_PID_ENV not in env  # its worker would end at once, watching a pid of another machine
    assert set(env) == set(trial_environment(spec)) and "PYTHONPATH" not in set(env) - set(os.environ)
    assert elsewhere.oom_evidence(elsewhere.oom_marker()) is None  # this host's cgroup says nothing about that node
    local = LocalLauncher.environment(elsewhere, spec)  # what ProcessLauncher and WarmSession send
    assert local[PARENT_PID_ENV] == str(os.getpid()) and local["PYTHONPATH"]
