"""vLLM server mode: the GPU split, ports, command line and trainer keys as values; the lifecycle
with a real stand-in server process (a Python http.server answering /health, with a child of its
own) in place of `trl vllm-serve`. No subprocess mocks: processes are started and must be gone.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import replace

import pytest

from helpers import ROOT

from grpo_ablate.contract.spec import HardwareSpec, VllmSpec

from grpo_ablate.launch.vllm_server import (
    VllmServerError,
    block_gpus,
    server_command,
    server_engine_args,
    server_ports,
    rendezvous_host,
    _port_free,
    server_trainer_keys,
    split_gpus,
    vllm_server,
)

SERVER_HW = HardwareSpec(gpus=8, num_processes=7, vllm=VllmSpec(mode="server", server_gpus=1, port=18000))
PAIR_HW = HardwareSpec(gpus=2, num_processes=1, vllm=VllmSpec(mode="server", server_gpus=1, port=18100))  # 1 train + 1 vLLM

# The stand-in: reports what it saw, starts a child (as vLLM's engine core is), then serves
# GET /health with 200 after `delay` seconds. With `ignore_term` it survives SIGTERM.
STANDIN = r'''
import http.server, json, os, signal, subprocess, sys, time
port, state, delay, ignore_term = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
if ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
# whole or absent (a rename): a test that waits for the file to exist, then stops the server, must find the pids
with open(state + ".tmp", "w") as f:
    json.dump({"pid": os.getpid(), "child": child.pid, "pgid": os.getpgid(0),
               "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "rank": os.environ.get("RANK")}, f)
os.replace(state + ".tmp", state)
time.sleep(delay)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
print("serving", port, flush=True)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def standin(tmp_path):
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    state = tmp_path / "state.json"

    def command(delay: float = 0.5, ignore_term: bool = False) -> list[str]:
        return [sys.executable, str(script), "{port}", str(state), str(delay), "1" if ignore_term else "0"]

    return command, state


# ------------------------------------------------------------------ pure parts


def test_server_takes_the_last_gpus_of_the_block():
    assert split_gpus([str(i) for i in range(8)], 1) == (["0", "1", "2", "3", "4", "5", "6"], ["7"])
    assert split_gpus(["4", "5", "6", "7"], 2) == (["4", "5"], ["6", "7"])


def test_split_refuses_a_block_with_no_training_gpu():
    with pytest.raises(ValueError, match="raise hardware.gpus to at least 2"):
        split_gpus(["0"], 1)
    with pytest.raises(ValueError, match="server_gpus must be >= 1"):
        split_gpus(["0", "1"], 0)


def test_block_is_the_trials_visible_devices_else_the_first_gpus():
    assert block_gpus({"CUDA_VISIBLE_DEVICES": "8,9,10,11"}, HardwareSpec(gpus=4)) == ["8", "9", "10", "11"]
    assert block_gpus({}, HardwareSpec(gpus=3)) == ["0", "1", "2"]
    assert block_gpus({"CUDA_VISIBLE_DEVICES": ""}, HardwareSpec(gpus=2)) == ["0", "1"]


def test_ports_are_offset_by_the_block_and_skip_taken_ones():
    free = lambda port: True  # noqa: E731
    assert server_ports(8000, ["0", "1"], is_free=free) == (8000, 51216)
    assert server_ports(8000, ["8", "9"], is_free=free) == (8008, 51224)
    assert server_ports(8000, ["GPU-3f2a", "GPU-77b1"], is_free=free) == (8000, 51216)
    taken = {8008, 8009}
    assert server_ports(8000, ["8"], is_free=lambda p: p not in taken) == (8010, 51224)
    with pytest.raises(VllmServerError, match="no free port"):
        server_ports(8000, ["0"], is_free=lambda p: False, span=5)


def test_the_group_port_is_checked_where_trls_client_puts_the_nccl_rendezvous(monkeypatch):
    """TRL's client names vLLM's get_ip() as master_address (the node's outward address, or VLLM_HOST_IP), not
    127.0.0.1: a port taken only there is skipped for the group, and still used for HTTP on loopback."""
    import socket

    monkeypatch.setenv("VLLM_HOST_IP", "10.1.2.3")
    assert rendezvous_host() == "10.1.2.3"
    monkeypatch.delenv("VLLM_HOST_IP")
    node = rendezvous_host()
    if node in ("127.0.0.1", "0.0.0.0"):
        pytest.skip("no outward interface on this machine: the rendezvous is loopback")
    with socket.socket() as held:
        held.bind((node, 0))
        held.listen()
        port = held.getsockname()[1]
        assert _port_free(port) and not _port_free(port, node)  # taken on the node's address only
        assert server_ports(port, ["0"], group_base=port + 100)[0] == port  # HTTP listens on loopback: free there
        http, group = server_ports(port + 100, ["0"], group_base=port)
        assert group != port and group > port  # the group skips it


def test_command_is_trl_vllm_serve_on_loopback():
    cmd = server_command("/models/qwen", 8007, tensor_parallel_size=2, dtype="bfloat16", trust_remote_code=True,
                         gpu_memory_utilization=0.85, python="/venv/bin/python")
    assert cmd[:4] == ["/venv/bin/python", "-m", "trl.cli.main", "vllm-serve"]
    args = dict(zip(cmd[4::2], cmd[5::2]))
    assert args == {"--model": "/models/qwen", "--host": "127.0.0.1", "--port": "8007", "--tensor_parallel_size": "2",
                    "--dtype": "bfloat16", "--trust_remote_code": "true", "--gpu_memory_utilization": "0.85"}
    assert "--dtype" not in server_command("m", 8000, dtype="auto")


def test_command_parses_with_the_installed_trl():
    """The flags are TRL's own: its parser accepts every one and turns them into `vllm serve` flags."""
    pytest.importorskip("trl")
    from trl.scripts.vllm_serve import build_command, make_parser

    cmd = server_command("/models/qwen", 8007, tensor_parallel_size=2, dtype="bfloat16", max_model_len=2048)
    script_args, extra = make_parser().parse_args_and_config(cmd[4:], return_remaining_strings=True)
    assert extra == []
    assert (script_args.model, script_args.port, script_args.host) == ("/models/qwen", 8007, "127.0.0.1")
    assert script_args.tensor_parallel_size == 2 and script_args.max_model_len == 2048
    served = build_command(script_args)
    assert "serve" in served and "--weight-transfer-config" in served


def test_the_studys_engine_settings_reach_the_server():
    """TRL reads vllm_gpu_memory_utilization / vllm_max_model_length only in colocate mode: in server
    mode launch.py forwards them to `trl vllm-serve`, whose own parser and command carry them to vLLM."""
    pytest.importorskip("trl")
    from trl.scripts.vllm_serve import build_command, make_parser

    trainer = {"vllm_gpu_memory_utilization": 0.35, "vllm_max_model_length": 1536, "learning_rate": 1e-6}
    assert server_engine_args(trainer) == {"gpu_memory_utilization": 0.35, "max_model_len": 1536}
    assert server_engine_args({"learning_rate": 1e-6}) == {}  # unset: vllm-serve's own defaults
    cmd = server_command("/models/qwen", 8007, **server_engine_args(trainer))
    script_args, extra = make_parser().parse_args_and_config(cmd[4:], return_remaining_strings=True)
    assert extra == [] and script_args.gpu_memory_utilization == 0.35 and script_args.max_model_len == 1536
    served = build_command(script_args)
    assert served[served.index("--gpu-memory-utilization") + 1] == "0.35"
    assert served[served.index("--max-model-len") + 1] == "1536"


def test_launch_forwards_the_engine_settings():
    import inspect

    from grpo_ablate.launch.process import ProcessLauncher

    assert "**server_engine_args(spec.trainer)" in inspect.getsource(ProcessLauncher._serve_vllm)


def test_trainer_keys_are_grpo_config_fields():
    pytest.importorskip("trl")
    from trl import GRPOConfig

    keys = server_trainer_keys(8007, 51223)
    fields = set(GRPOConfig.__dataclass_fields__)
    assert set(keys) <= fields
    assert keys["vllm_mode"] == "server" and keys["vllm_server_port"] == 8007 and keys["vllm_group_port"] == 51223
    cfg = GRPOConfig(output_dir="/tmp/unused", use_cpu=True, bf16=False, report_to=[], **keys)
    assert cfg.use_vllm and cfg.vllm_server_host == "127.0.0.1"


def test_modes_other_than_server_start_nothing(tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    with vllm_server(HardwareSpec(), "m", env, tmp_path / "v.log") as served:
        assert served["env"] == env and served["trainer"] == {} and served["pid"] is None
    with vllm_server(HardwareSpec(vllm=VllmSpec(mode="colocate")), "m", env, tmp_path / "v.log") as served:
        assert served["trainer"] == {"use_vllm": True, "vllm_mode": "colocate"}
    assert not (tmp_path / "v.log").exists()


def test_too_many_processes_for_the_training_gpus(tmp_path, standin):
    command, _ = standin
    hw = replace(SERVER_HW, num_processes=8)
    with pytest.raises(ValueError, match="8 training processes but only 7"):
        with vllm_server(hw, "m", {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, tmp_path / "v.log", command=command()):
            pass


# ------------------------------------------------------------------ lifecycle


def test_server_lifecycle_with_a_standin(tmp_path, standin):
    command, state = standin
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "RANK": "3", "KEEP": "yes"}
    log = tmp_path / "trial" / "vllm.log"
    with vllm_server(SERVER_HW, "/models/m", env, log, command=command(delay=1.0), poll_interval=0.2) as served:
        seen = json.loads(state.read_text())
        assert served["pid"] == seen["pid"] == seen["pgid"]  # its own process group
        assert seen["cuda"] == "7" and seen["rank"] is None  # the last GPU; no rank leaks into the server
        assert served["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6" and served["env"]["KEEP"] == "yes"
        assert served["train_gpus"] == ["0", "1", "2", "3", "4", "5", "6"] and served["server_gpus"] == ["7"]
        port = served["trainer"]["vllm_server_port"]
        assert served["url"] == f"http://127.0.0.1:{port}" and port >= 18000
        import urllib.request

        with urllib.request.urlopen(served["url"] + "/health", timeout=5) as r:
            assert r.status == 200
    # the server and its child are gone once the block ends
    assert _wait_gone(seen["pid"]) and _wait_gone(seen["child"])
    assert "serving" in log.read_text() and "CUDA_VISIBLE_DEVICES=7" in log.read_text()


def test_server_is_stopped_when_the_trial_fails(tmp_path, standin):
    command, state = standin
    with pytest.raises(RuntimeError, match="trial blew up"):
        with vllm_server(PAIR_HW, "m", {"CUDA_VISIBLE_DEVICES": "0,1"}, tmp_path / "v.log",
                         command=command(delay=0.2), poll_interval=0.1):
            raise RuntimeError("trial blew up")
    seen = json.loads(state.read_text())
    assert _wait_gone(seen["pid"]) and _wait_gone(seen["child"])


def test_a_server_ignoring_sigterm_is_killed(tmp_path, standin):
    command, state = standin

    def serve_and_stop() -> None:
        with vllm_server(PAIR_HW, "m", {"CUDA_VISIBLE_DEVICES": "0,1"}, tmp_path / "v.log",
                         command=command(delay=0.2, ignore_term=True), poll_interval=0.1, stop_timeout=1.0):
            pass

    stopper = threading.Thread(target=serve_and_stop, daemon=True)
    stopper.start()
    stopper.join(timeout=120)  # the stop returns: it kills what SIGTERM did not end, never waits on it for good
    assert not stopper.is_alive(), "stopping a server that ignores SIGTERM hung"
    seen = json.loads(state.read_text())
    assert _wait_gone(seen["pid"]) and _wait_gone(seen["child"])


def test_a_server_that_dies_is_reported_with_its_log(tmp_path):
    crash = [sys.executable, "-c", "import sys; print('CUDA error: no kernel image is available'); sys.exit(3)"]
    with pytest.raises(VllmServerError, match=r"exited with code 3(.|\n)*no kernel image"):
        with vllm_server(PAIR_HW, "m", {"CUDA_VISIBLE_DEVICES": "0,1"}, tmp_path / "v.log", command=crash,
                         poll_interval=0.1):
            pytest.fail("the block must not run without a server")


def test_a_server_that_never_gets_healthy_times_out(tmp_path, standin):
    command, state = standin
    # 5 s: the stand-in must have written its pids before the timeout ends it (a loaded machine starts Python slowly)
    with pytest.raises(VllmServerError, match=r"not healthy after 5 s"):
        with vllm_server(PAIR_HW, "m", {"CUDA_VISIBLE_DEVICES": "0,1"}, tmp_path / "v.log",
                         command=command(delay=60), startup_timeout=5.0, poll_interval=0.1, stop_timeout=2.0):
            pytest.fail("the block must not run without a server")
    seen = json.loads(state.read_text())
    assert _wait_gone(seen["pid"]) and _wait_gone(seen["child"])


def test_interrupt_while_waiting_stops_the_server(tmp_path, standin):
    """Ctrl-C during the (minutes-long) vLLM start-up must not leave a server holding the GPU."""
    command, state = standin
    old = signal.signal(signal.SIGALRM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))

    done = threading.Event()

    def interrupt_once_started() -> None:  # an event, not a clock: the stand-in has written its pids
        while not done.wait(0.05):
            if state.exists():
                os.kill(os.getpid(), signal.SIGALRM)  # Python runs the handler in the main thread, inside the wait
                return

    interrupter = threading.Thread(target=interrupt_once_started, daemon=True)
    try:
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            with vllm_server(PAIR_HW, "m", {"CUDA_VISIBLE_DEVICES": "0,1"}, tmp_path / "v.log",
                             command=command(delay=60), poll_interval=0.1, stop_timeout=2.0):
                pass
    finally:
        done.set()
        interrupter.join()  # no signal can come after the handler is put back
        signal.signal(signal.SIGALRM, old)
    seen = json.loads(state.read_text())
    assert _wait_gone(seen["pid"]) and _wait_gone(seen["child"])


_HOLDER = r'''
import os, sys, time
from grpo_ablate.core.child_processes import die_with_parent
from grpo_ablate.contract.spec import HardwareSpec, VllmSpec
from grpo_ablate.launch.vllm_server import vllm_server
hw = HardwareSpec(gpus=2, num_processes=1, vllm=VllmSpec(mode="server", server_gpus=1, port=18200))
command = sys.argv[1:]
with vllm_server(hw, "m", {"CUDA_VISIBLE_DEVICES": "0,1"}, sys.argv[0] + ".log", command=command, poll_interval=0.1,
                 preexec_fn=die_with_parent()):
    print("ready", flush=True)
    time.sleep(600)
'''


def test_server_dies_with_a_sigkilled_orchestrator(tmp_path, standin):
    """The server gets the parent-death signal (grpo_ablate/core/child_processes.py): a `kill -9` of the study ends it too.
    (Its engine children are vLLM's own business: current vLLM gives them the same signal.)"""
    import subprocess

    command, state = standin
    holder = tmp_path / "holder.py"
    holder.write_text(_HOLDER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(holder), *command(delay=0.2)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        seen = json.loads(state.read_text())
        assert _alive(seen["pid"])
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _wait_gone(seen["pid"], timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        seen = json.loads(state.read_text()) if state.exists() else {}
        for pid in (seen.get("pid"), seen.get("child")):
            if pid and _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_on_a_cpu_the_server_shares_the_machine_and_two_at_once_get_their_own_ports(tmp_path, standin):
    """hardware.gpus 0: no GPU split, no hardware.gpus=2 demand; two servers at once never share a port,
    even one that no server binds before the trial uses it (TRL's weight-sync port, vllm_group_port)."""
    command, state = standin
    hw = HardwareSpec(gpus=0, vllm=VllmSpec(mode="server", port=18300))
    with vllm_server(hw, "/models/m", {"KEEP": "yes"}, tmp_path / "a.log", command=command(delay=0.2),
                     poll_interval=0.2) as first:
        seen = json.loads(state.read_text())
        assert seen["cuda"] == "" and first["env"]["CUDA_VISIBLE_DEVICES"] == "" and first["env"]["KEEP"] == "yes"
        assert first["train_gpus"] == [] and first["server_gpus"] == []
        ports = {first["trainer"]["vllm_server_port"], first["trainer"]["vllm_group_port"]}
        with vllm_server(hw, "/models/m", {}, tmp_path / "b.log", command=command(delay=0.2), poll_interval=0.2) as second:
            again = {second["trainer"]["vllm_server_port"], second["trainer"]["vllm_group_port"]}
            assert not ports & again, (ports, again)

