"""A process per trial: the trial's own process tree, started fresh and ended with the trial.

    python -m grpo_ablate.trainer.worker <trial_dir>/spec.json
    python -m torch.distributed.run --nproc_per_node N ... -m grpo_ablate.trainer.worker <spec>
    python -m accelerate.commands.launch --num_processes N ... -m grpo_ablate.trainer.worker <spec>

with its output in `log.txt`, in a session of its own (so the whole tree can be signalled),
dying with the thread that started it (children.die_with_parent; the worker also watches the
orchestrator's pid, which covers torchrun's ranks). A study's vLLM server (hardware.vllm.mode
server) is started before the trial and stopped after it, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO, Callable, Protocol

from grpo_ablate.core.child_processes import die_with_parent
from grpo_ablate.contract.spec import TrialSpec
from grpo_ablate.launch.vllm_server import (DEFAULT_GROUP_PORT, server_command, server_engine_args, server_trainer_keys,
                                             vllm_server)
from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX

from .base import TERM_GRACE_SECONDS
from .local import LocalLauncher

__all__ = ["ProcessLauncher", "build_command", "command_name", "kill_tree"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command_name(spec: TrialSpec) -> str:
    """hardware.command, with "auto" resolved: python for one process, else torchrun (or accelerate with its config)."""
    choice = str(spec.hardware.command or "auto")
    if choice != "auto":
        return choice
    if spec.num_processes <= 1:
        return "python"
    # accelerate only when the study gives it a config: `accelerate launch --cpu --num_processes 2`
    # was seen starting ONE process, torchrun starts N reliably on CPU (gloo) and GPU (nccl).
    return "accelerate" if spec.hardware.accelerate_config else "torchrun"


def build_command(spec: TrialSpec, spec_path: str | os.PathLike[str]) -> list[str]:
    """The argv that starts the trial's process(es): the built-in worker under python, torchrun or accelerate, or
    for a command trial (spec.script) the command worker, which starts the user's own command itself
    (trainer/command_worker.py; its line: contract/command.py command_line)."""
    if spec.script is not None:
        return [sys.executable, "-m", "grpo_ablate.trainer.command_worker", os.fspath(spec_path)]
    worker = ["-m", "grpo_ablate.trainer.worker", os.fspath(spec_path)]
    launcher = command_name(spec)
    n = spec.num_processes
    if launcher == "python":
        if n != 1:
            raise ValueError(f"hardware.command 'python' starts one process, but num_processes is {n}; use torchrun or accelerate")
        return [sys.executable, *worker]
    if launcher == "torchrun":
        return [
            sys.executable, "-m", "torch.distributed.run",
            "--nnodes", "1", "--nproc_per_node", str(n),
            "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
            *worker,
        ]
    if launcher == "accelerate":
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(n), "--main_process_port", str(_free_port())]
        if spec.hardware.accelerate_config:
            cmd += ["--config_file", os.fspath(spec.hardware.accelerate_config)]
        return [*cmd, *worker]
    raise ValueError(f"hardware.command must be auto, python, torchrun or accelerate, got {launcher!r}")


class _Child(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


KILL_WAIT_SECONDS = 30.0  # after SIGKILL: a process ends at once unless the kernel holds it (uninterruptible I/O)


def kill_tree(proc: _Child, grace: float = TERM_GRACE_SECONDS) -> bool:
    """SIGTERM the process group `proc` leads, then SIGKILL whatever of the group is left after `grace` seconds;
    True once `proc` has ended, False when it has not KILL_WAIT_SECONDS after the SIGKILL (no wait without end).

    The group outlives its leader when a trial's process forked and exited first (a reward's
    `sh -c "sleep 300 &"` under a worker killed by the memory cap): what is left of it is
    killed even when `proc` itself has already ended.
    """
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=KILL_WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        return False
    return True


class ProcessLauncher(LocalLauncher):
    """Each trial in a fresh process tree (python, torchrun or accelerate, from hardware.command).

    `command` replaces build_command (a test's stand-in child, a wrapper such as `srun`).
    """

    @classmethod
    def chosen_by_auto(cls, spec: TrialSpec, *, probe: bool = False) -> bool:
        return True  # the fallback: any trial runs as a process tree of its own

    @classmethod
    def describe(cls, spec: TrialSpec, spec_path: Path) -> dict[str, list[str]]:
        """The trial's command, and in vLLM server mode the server's (on the study's port; a run picks free ones)."""
        lines: dict[str, list[str]] = {}
        vllm = spec.hardware.vllm
        if vllm.mode == "server":
            port = vllm.port
            lines["vllm_server"] = server_command(
                str(spec.model.name_or_path), port, tensor_parallel_size=vllm.server_gpus,
                dtype=spec.model.dtype, revision=spec.model.revision,
                trust_remote_code=bool(spec.model.trust_remote_code), **server_engine_args(spec.trainer))
            spec.trainer.update(server_trainer_keys(port, DEFAULT_GROUP_PORT))
        lines["launch"] = build_command(spec, spec_path)
        return lines

    def __init__(self, command: Callable[[TrialSpec, Path], list[str]] | None = None) -> None:
        self._command = command or build_command
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._server = contextlib.ExitStack()

    def _serve_vllm(self, spec: TrialSpec, env: dict[str, str]) -> dict[str, str]:
        """Start the trial's vLLM server (launch/vllm_server.py); point the trainer at it.

        Returns the training processes' environment (CUDA_VISIBLE_DEVICES without the server GPUs).
        """
        model = str(spec.model.name_or_path)
        if model.startswith(BUILTIN_MODEL_PREFIX):
            raise ValueError("vLLM server mode needs a model folder or hub id; the built-in model is for CPU runs")
        served = self._server.enter_context(
            vllm_server(
                spec.hardware, model, env, spec.path / "vllm.log",
                dtype=spec.model.dtype, revision=spec.model.revision,
                trust_remote_code=bool(spec.model.trust_remote_code), preexec_fn=die_with_parent(),
                **server_engine_args(spec.trainer),
            )
        )
        spec.trainer.update(served["trainer"])  # host, ports: this trial's server, whatever the study said
        return dict(served["env"])

    def start(self, spec: TrialSpec, env: dict[str, str], log_path: Path) -> None:
        self._log = log_path.open("ab", buffering=0)
        if spec.hardware.vllm.mode == "server":
            env = self._serve_vllm(spec, env)
        spec_path = spec.save()
        cmd = self._command(spec, spec_path)
        self._log.write(("$ " + " ".join(cmd) + "\n").encode())
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                      cwd=os.getcwd(), preexec_fn=die_with_parent())
        self.processes_started += 1

    def poll(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def wait(self, seconds: float) -> int | None:
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self._proc is not None:
            kill_tree(self._proc)

    def ended(self) -> None:
        if self._proc is not None:
            kill_tree(self._proc)  # the trial's process group, whatever of it outlived the worker
        self._server.close()
        if self._log is not None:
            self._log.close()
            self._log = None
