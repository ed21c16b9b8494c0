"""vLLM server mode for one trial: start the generation server, train beside it, always stop it.

    with vllm_server(spec.hardware, model_path, env, trial_dir / "vllm.log") as served:
        env = served["env"]                  # CUDA_VISIBLE_DEVICES: the training GPUs only
        trainer_kwargs.update(served["trainer"])   # use_vllm, vllm_mode, vllm_server_host/port, vllm_group_port
        ... launch the training processes ...

The Open R1 layout is the case this exists for: a trial owns a block of 8 GPUs, the LAST
`hardware.vllm.server_gpus` of them serve vLLM (`trl vllm-serve`, which runs `vllm serve`
with the flags TRL's client needs: NCCL weight transfer, processed logprobs), the first 7
train. TRL itself never starts the server; without this every trial would need a server
started by hand and a study could not run unattended.

Lifecycle, one per trial (weights change every step, so a server is never shared):
- the server is its own process group (start_new_session), its output goes to the trial's
  `vllm.log`; launch.py gives it the parent-death signal, as it does the trial;
- the trial waits for GET /health to answer 200; if the server process exits first, or the
  wait passes `startup_timeout`, VllmServerError says so with the log's tail;
- on leaving the block, normally or by an exception (trial failed, Ctrl-C), the whole group is
  sent SIGTERM, then SIGKILL after `stop_timeout`: vLLM spawns engine processes that would
  otherwise keep the GPU.

Ports: several trials may run on one host (one per GPU block), so the HTTP port and TRL's
NCCL weight-sync port (`vllm_group_port`) are offset by the block's first GPU index and moved
up past any port already taken, or already handed to another trial of this process whose server
has not bound it yet (trials that start together would otherwise pick the same free port).

On a CPU (hardware.gpus 0, no GPU in the trial's block) the server and the training process
share the machine: nothing is split, tensor parallelism is 1 (vLLM's CPU build serves it). TRL's
weight sync to the server needs NCCL on CUDA, so server-mode training itself needs GPUs. Everything but `vllm_server` itself is pure and unit-tested
(tests/test_vllm_server.py); the lifecycle is tested with a stand-in HTTP server.

Only the standard library is imported: the orchestrator imports neither torch nor TRL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from grpo_ablate.core.children import die_with_parent
from grpo_ablate.contract.spec import HardwareSpec

__all__ = [
    "VllmServerError",
    "split_gpus",
    "block_gpus",
    "server_ports",
    "rendezvous_host",
    "gpu_split",
    "server_command",
    "server_engine_args",
    "server_environments",
    "server_trainer_keys",
    "vllm_server",
]

DEFAULT_GROUP_PORT = 51216  # TRL's default vllm_group_port
HEALTH_PATH = "/health"
HOST = "127.0.0.1"  # the server and the trial's training processes share a host
_HANDED_OUT: set[int] = set()  # ports of this process's servers, from their pick until they stop
_HANDING = threading.Lock()


class VllmServerError(RuntimeError):
    """The vLLM server of a trial could not be started or did not become healthy."""


# ------------------------------------------------------------------ pure parts


def block_gpus(env: Mapping[str, str], hardware: HardwareSpec) -> list[str]:
    """The trial's GPU block: its CUDA_VISIBLE_DEVICES, else GPUs 0..hardware.gpus-1."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip():
        return [g.strip() for g in visible.split(",") if g.strip() and g.strip() != "-1"]
    n = int(hardware.gpus or 0)
    return [str(i) for i in range(n)]


def split_gpus(gpus: Sequence[str], server_gpus: int) -> tuple[list[str], list[str]]:
    """(training GPUs, server GPUs): the server takes the LAST `server_gpus` of the block.

    The last ones, as Open R1 does (7 train + 1 vLLM on an 8-GPU node: the server on GPU 7), so
    the training ranks keep the low indices the accelerate/DeepSpeed configs expect.
    """
    if server_gpus < 1:
        raise ValueError(f"hardware.vllm.server_gpus must be >= 1, got {server_gpus}")
    if len(gpus) <= server_gpus:
        raise ValueError(
            f"vLLM server mode needs more GPUs than the server takes: the trial has {len(gpus)} GPU(s) "
            f"({','.join(gpus) or 'none'}) and hardware.vllm.server_gpus is {server_gpus}; raise hardware.gpus "
            f"to at least {server_gpus + 1} (or use hardware.vllm.mode: colocate)")
    return list(gpus[:-server_gpus]), list(gpus[-server_gpus:])


def gpu_split(hardware: HardwareSpec, env: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """(training GPUs, server GPUs) of a server-mode trial whose environment is `env`: its block (block_gpus)
    split by split_gpus; no GPU in the block (a CPU trial): ([], []), the server beside the training process."""
    block = block_gpus(env, hardware)
    return split_gpus(block, hardware.vllm.server_gpus) if block else ([], [])


def server_environments(env: Mapping[str, str], train_gpus: Sequence[str],
                        serve_gpus: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the training processes' environment, the server's): each sees only its GPUs (CUDA_VISIBLE_DEVICES), and
    the server none of torch.distributed's rank variables (it is no rank of the training group). The launcher
    starts them with these and `plan --commands` prints them: one function, so the two cannot differ."""
    server_env = {k: v for k, v in env.items()
                  if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    server_env["CUDA_VISIBLE_DEVICES"] = ",".join(serve_gpus)
    train_env = dict(env)
    train_env["CUDA_VISIBLE_DEVICES"] = ",".join(train_gpus)
    return train_env, server_env


def rendezvous_host(env: Mapping[str, str] = os.environ) -> str:
    """The address TRL's client names as the NCCL weight-sync rendezvous (`master_address` in
    VLLMClient.init_communicator, from vLLM's get_ip): VLLM_HOST_IP when set, else the address of the
    interface that routes outwards (a UDP socket "connected" to a public address sends nothing), IPv4 then
    IPv6, else 0.0.0.0. The group port must be free there, not only on 127.0.0.1 where the HTTP server is."""
    given = env.get("VLLM_HOST_IP", "").strip()
    if given:
        return given
    for family, probe in ((socket.AF_INET, ("8.8.8.8", 80)), (socket.AF_INET6, ("2001:4860:4860::8888", 80))):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect(probe)
                return str(s.getsockname()[0])
        except OSError:
            continue
    return "0.0.0.0"


def _port_free(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _block_offset(gpus: Sequence[str]) -> int:
    """The block's first GPU index (0 when GPUs are given by UUID): disjoint blocks, disjoint ports."""
    first = gpus[0] if gpus else "0"
    return int(first) if first.isdigit() else 0


def _group_port_free(port: int) -> bool:
    """Free on 127.0.0.1 and on the rendezvous address (two trials' groups must not meet on the node's address)."""
    host = rendezvous_host()
    return _port_free(port) and (host in (HOST, "0.0.0.0") or _port_free(port, host))


def server_ports(base_port: int, gpus: Sequence[str], *, group_base: int = DEFAULT_GROUP_PORT,
                 is_free: Any = _port_free, group_is_free: Any = None, span: int = 200) -> tuple[int, int]:
    """(HTTP port, NCCL weight-sync port) for a trial's server: offset by the block, then the next free; the HTTP
    port checked where the server listens (127.0.0.1), the group port where the rendezvous happens
    (`group_is_free`, default: also on rendezvous_host(); `is_free` when only that is given)."""
    offset = _block_offset(gpus)
    group_free = group_is_free or (_group_port_free if is_free is _port_free else is_free)

    def first_free(start: int, avoid: set[int], free: Any, where: str) -> int:
        for port in range(start, min(start + span, 65536)):
            if port not in avoid and free(port):
                return port
        raise VllmServerError(f"no free port in {start}..{start + span - 1} on {where} for the vLLM server")

    http = first_free(base_port + offset, set(), is_free, HOST)
    group = first_free(group_base + offset, {http}, group_free, f"{HOST} and {rendezvous_host()}")
    return http, group


def server_command(model: str, port: int, *, tensor_parallel_size: int = 1, dtype: str | None = None,
                   revision: str | None = None, trust_remote_code: bool = False,
                   gpu_memory_utilization: float | None = None, max_model_len: int | None = None,
                   python: str | None = None) -> list[str]:
    """`trl vllm-serve` with this trial's model, run by the same Python as the trial.

    TRL 1.16's vllm-serve only execs `vllm serve` with the flags its client needs (NCCL weight
    transfer, processed logprobs, VLLM_SERVER_DEV_MODE): going through it keeps those right for
    whichever TRL is installed. It binds to loopback: only this trial's processes talk to it.
    """
    cmd = [python or sys.executable, "-m", "trl.cli.main", "vllm-serve",
           "--model", model, "--host", HOST, "--port", str(port),
           "--tensor_parallel_size", str(tensor_parallel_size)]
    if dtype and dtype != "auto":
        cmd += ["--dtype", dtype]
    if revision:
        cmd += ["--revision", revision]
    if trust_remote_code:
        cmd += ["--trust_remote_code", "true"]
    if gpu_memory_utilization is not None:
        cmd += ["--gpu_memory_utilization", str(gpu_memory_utilization)]
    if max_model_len is not None:
        cmd += ["--max_model_len", str(max_model_len)]
    return cmd


def server_engine_args(trainer: Mapping[str, Any]) -> dict[str, Any]:
    """The study's engine settings for `trl vllm-serve`: TRL reads vllm_gpu_memory_utilization and
    vllm_max_model_length only in colocate mode, so in server mode they reach the engine only here.

    Only keys the study set: otherwise vllm-serve keeps its own defaults (0.9 of the GPU, the
    model's context length), which suit a GPU the server has to itself.
    """
    out: dict[str, Any] = {}
    if trainer.get("vllm_gpu_memory_utilization") is not None:
        out["gpu_memory_utilization"] = float(trainer["vllm_gpu_memory_utilization"])
    if trainer.get("vllm_max_model_length") is not None:
        out["max_model_len"] = int(trainer["vllm_max_model_length"])
    return out


def server_trainer_keys(port: int, group_port: int) -> dict[str, Any]:
    """The GRPOConfig keywords that point the trainer at its server (TRL 1.16 field names)."""
    return {
        "use_vllm": True,
        "vllm_mode": "server",
        "vllm_server_host": HOST,
        "vllm_server_port": port,
        "vllm_group_port": group_port,
        "vllm_server_base_url": None,  # a base URL would win over host/port
    }


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return text[-chars:] if text else "(empty log)"


# ------------------------------------------------------------------ the lifecycle


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - loopback only
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _stop_group(proc: subprocess.Popen, stop_timeout: float) -> None:
    """SIGTERM to the server's whole process group, SIGKILL if it lingers."""
    if proc.poll() is not None:
        pgid = proc.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)  # the leader exited; engine children may not have
        return
    for sig, wait in ((signal.SIGTERM, stop_timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group
        return


@contextlib.contextmanager
def vllm_server(hardware: HardwareSpec, model: str, env: Mapping[str, str], log_path: str | os.PathLike[str], *,
                dtype: str | None = None, revision: str | None = None, trust_remote_code: bool = False,
                gpu_memory_utilization: float | None = None, max_model_len: int | None = None,
                command: Sequence[str] | None = None, startup_timeout: float = 900.0,
                stop_timeout: float = 30.0, poll_interval: float = 1.0,
                preexec_fn: Callable[[], None] | None = None) -> Iterator[dict[str, Any]]:
    """Serve `model` with vLLM for one trial when hardware.vllm.mode is "server".

    Yields {"env": the training processes' environment, "trainer": GRPOConfig keys to add,
    "url", "pid", "server_gpus", "train_gpus"}. For mode "colocate" the trainer keys turn colocated
    vLLM on; for "none" nothing changes. `command` replaces the server command line (tests use a
    stand-in); "{port}" and "{model}" in it are filled in. `preexec_fn` runs in the server
    process before it starts (launch passes one that ties the server's life to the trial's parent).
    """
    base_env = dict(env)
    mode = hardware.vllm.mode
    if mode != "server":
        keys: dict[str, Any] = {"use_vllm": True, "vllm_mode": "colocate"} if mode == "colocate" else {}
        yield {"env": base_env, "trainer": keys, "url": None, "pid": None, "server_gpus": [], "train_gpus": []}
        return

    server_n = hardware.vllm.server_gpus
    block = block_gpus(base_env, hardware)
    train_gpus, serve_gpus = gpu_split(hardware, base_env)
    processes = hardware.num_processes
    if block and isinstance(processes, int) and processes > len(train_gpus):
        raise ValueError(f"{processes} training processes but only {len(train_gpus)} training GPU(s) "
                         f"({','.join(train_gpus)}) once vLLM takes {','.join(serve_gpus)}; lower hardware.num_processes "
                         f"(or the accelerate config's num_processes) or raise hardware.gpus")
    with _HANDING:
        port, group_port = server_ports(hardware.vllm.port, block,
                                        is_free=lambda p: p not in _HANDED_OUT and _port_free(p),
                                        group_is_free=lambda p: p not in _HANDED_OUT and _group_port_free(p))
        _HANDED_OUT.update((port, group_port))
    try:
        yield from _serve(model, port, group_port, base_env, train_gpus, serve_gpus, log_path,
                          tensor_parallel_size=server_n if block else 1, dtype=dtype, revision=revision,
                          trust_remote_code=trust_remote_code, gpu_memory_utilization=gpu_memory_utilization,
                          max_model_len=max_model_len, command=command, startup_timeout=startup_timeout,
                          stop_timeout=stop_timeout, poll_interval=poll_interval, preexec_fn=preexec_fn)
    finally:
        with _HANDING:
            _HANDED_OUT.difference_update((port, group_port))


def _serve(model: str, port: int, group_port: int, base_env: dict[str, str], train_gpus: list[str],
           serve_gpus: list[str], log_path: str | os.PathLike[str], *, tensor_parallel_size: int, dtype: str | None,
           revision: str | None, trust_remote_code: bool, gpu_memory_utilization: float | None,
           max_model_len: int | None, command: Sequence[str] | None, startup_timeout: float, stop_timeout: float,
           poll_interval: float, preexec_fn: Callable[[], None] | None) -> Iterator[dict[str, Any]]:
    """Start the server on its ports, wait until healthy, yield what vllm_server yields, always stop it."""
    if command is None:
        cmd = server_command(model, port, tensor_parallel_size=tensor_parallel_size, dtype=dtype, revision=revision,
                             trust_remote_code=trust_remote_code, gpu_memory_utilization=gpu_memory_utilization,
                             max_model_len=max_model_len)
    else:
        cmd = [str(part).format(port=port, model=model) for part in command]

    train_env, server_env = server_environments(base_env, train_gpus, serve_gpus)

    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    url = f"http://{HOST}:{port}"
    with open(log_path, "ab") as log:
        log.write(f"$ CUDA_VISIBLE_DEVICES={server_env['CUDA_VISIBLE_DEVICES']} {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, env=server_env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=preexec_fn or die_with_parent())
    try:
        started = time.monotonic()
        while not _healthy(url + HEALTH_PATH):
            code = proc.poll()
            if code is not None:
                raise VllmServerError(f"the vLLM server exited with code {code} before it was ready "
                                      f"({' '.join(cmd)}); the end of {log_path}:\n{_tail(log_path)}")
            if time.monotonic() - started > startup_timeout:
                raise VllmServerError(f"the vLLM server on {url} was not healthy after {startup_timeout:.0f} s "
                                      f"(GET {HEALTH_PATH}); the end of {log_path}:\n{_tail(log_path)}")
            time.sleep(poll_interval)
        yield {"env": train_env, "trainer": server_trainer_keys(port, group_port), "url": url, "pid": proc.pid,
               "server_gpus": serve_gpus, "train_gpus": train_gpus}
    finally:
        _stop_group(proc, stop_timeout)
