"""GPU smoke check: GRPO trials on one CUDA GPU, generating with HF generate and with vLLM colocate.

    python benchmarks/gpu_smoke.py                 # on a CUDA machine with vLLM: both modes, <= 5 minutes
    pytest -m gpu tests/test_gpu_smoke.py          # the same, as a test (skips without CUDA or vLLM)
    python benchmarks/gpu_smoke.py --cpu --modes hf   # the plumbing only, on a CPU (no vLLM, no bf16)

What it proves on a GPU machine: a study runs end to end in bf16 through `grpo-ablate run`, with
TRL's two generation paths, and what each costs. A tiny Qwen2 (2 layers, hidden 256, 4 heads of
64: a head size every vLLM attention backend takes) with the built-in character tokenizer is
saved in bf16 to a local folder, as vLLM needs a folder it can load by itself (config,
safetensors, tokenizer.json). The model is untrained, so rewards stay near zero: this is a
throughput and plumbing check, not a learning one.

One study per mode (the generation engine is a trainer setting, not a searched knob), each one
trial of the same shape (G=8, 128 completions of 32 tokens per step, a fixed step budget), so
the two trials differ only in how completions are generated. It prints samples/sec (completions
per second of training wall time, as `grpo-ablate` measures it for every trial) for each mode and
their ratio, and writes everything to OUT/gpu_smoke.json. Then the pre-flight commands on the
same model: `probe` (its points in one process, CUDA's peak memory) and `advise` (vLLM's sampler
when vLLM is among the modes); --no-preflight skips them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODES = ("hf", "vllm")
LABELS = {"hf": "HF generate", "vllm": "vLLM colocate"}
REPORTED = ("samples_per_second", "tokens_per_second", "train_seconds", "load_seconds", "peak_memory_mb",
            "final_reward", "steps")


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


def study_file(out: Path, mode: str, model: Path, steps: int, cpu: bool) -> Path:
    """The one-trial study of a mode; the two differ only in the generation engine."""
    import yaml

    trainer: dict[str, Any] = {
        "learning_rate": 1.0e-5,
        # 128 completions of up to 32 tokens per step (16 prompts x G=8); on a CPU, a small step
        "per_device_train_batch_size": 16 if cpu else 128,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 8 if cpu else 32,
        "beta": 0.0,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "temperature": 1.0,
        "bf16": not cpu,
        "gradient_checkpointing": False,
    }
    hardware: dict[str, Any] = {"num_processes": 1, "gpus": 0 if cpu else 1}
    if mode == "vllm":
        trainer.update({"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.25,
                        "vllm_max_model_length": 128})
        hardware["vllm"] = {"mode": "colocate"}
    study = {
        "study": {"name": f"gpu-smoke-{mode}", "output_dir": str(out / mode), "sampler": "ablation",
                  "baseline": {"num_generations": 8}, "seeds": [0], "workers": 1, "trial_timeout": 240,
                  "max_consecutive_failures": 1},
        "model": {"name_or_path": str(model), "dtype": "float32" if cpu else "bfloat16"},
        "data": {"task": "addition", "num_prompts": 2000},
        "trainer": trainer,
        "hardware": hardware,
        "search": {"num_generations": [8]},
        "budget": {"max_steps": steps},
    }
    path = out / f"gpu-smoke-{mode}.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def run_mode(out: Path, mode: str, model: Path, steps: int, cpu: bool, timeout: float) -> dict[str, Any]:
    path = study_file(out, mode, model, steps, cpu)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", PYTHONUNBUFFERED="1")
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "grpo_ablate", "run", str(path), "--no-report"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - started
    (out / f"{mode}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    result: dict[str, Any] = {"mode": mode, "label": LABELS[mode], "exit_code": proc.returncode,
                              "wall_seconds": round(wall, 1), "log": str(out / f"{mode}.log")}
    trial = _the_trial(path)
    if trial is not None:
        result["outcome"] = trial.user_attrs.get("outcome")
        result["reason"] = trial.user_attrs.get("reason")
        result.update({k: trial.user_attrs.get(k) for k in REPORTED})
    if proc.returncode != 0 or result.get("outcome") != "completed":
        result["error"] = (result.get("reason") or proc.stderr[-2000:] or proc.stdout[-2000:]).strip()
    return result


def run_preflight(out: Path, model: Path, cpu: bool, vllm: bool, timeout: float) -> dict[str, Any]:
    """`grpo-ablate probe` (CUDA's peak memory, points in one process) and `grpo-ablate advise`
    (sampling with vLLM when the study uses it) on the same tiny model."""
    import yaml

    study = yaml.safe_load(study_file(out, "vllm" if vllm else "hf", model, 1, cpu).read_text())
    study["study"].update(name="gpu-smoke-preflight", output_dir=str(out / "preflight"), sampler="tpe", n_trials=2)
    study["study"].pop("baseline", None)
    study["search"] = {"num_generations": [4, 8, 16], "generation_batch_size": "probed",
                       "max_generation_batch_size": 64 if cpu else 512}
    path = out / "gpu-smoke-preflight.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1", PYTHONUNBUFFERED="1")
    if cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    result: dict[str, Any] = {"mode": "preflight", "label": "probe + advise"}
    started = time.perf_counter()
    for command, extra in (("probe", ["--steps", "1"]), ("advise", ["--k", "4", "--prompts", "16"])):
        left = timeout - (time.perf_counter() - started)
        proc = subprocess.run([sys.executable, "-m", "grpo_ablate", command, str(path), *extra], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=max(left, 1))
        (out / f"preflight-{command}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        result[f"{command}_exit_code"] = proc.returncode
        if proc.returncode != 0:
            result["error"] = f"{command} exited {proc.returncode}: {(proc.stderr or proc.stdout)[-1500:]}"
            return result
    probe = json.loads((out / "preflight" / "probe.json").read_text())
    samples = json.loads((out / "preflight" / "advise" / "samples.json").read_text())
    advice = json.loads((out / "preflight" / "advise.json").read_text())
    result.update(probe_points=len(probe["points"]), probe_processes=probe.get("processes"),
                  probe_seconds=probe.get("total_seconds"), one_trial_estimate_s=probe.get("one_trial_estimate_s"),
                  memory_kind=sorted({p.get("memory_kind") for p in probe["points"]}), best=probe.get("best"),
                  advise_backend=samples.get("backend"), advise_seconds=advice.get("seconds"))
    want_kind, want_backend = ("rss" if cpu else "cuda"), ("vllm" if vllm else "transformers")
    if result["memory_kind"] != [want_kind] or result["advise_backend"] != want_backend:
        result["error"] = f"expected {want_kind} memory and the {want_backend} sampler, got {result}"
    return result


def _the_trial(path: Path):
    import optuna

    from grpo_ablate.config import load_study
    from grpo_ablate.storage import open_storage

    study = load_study(path)
    try:
        ostudy = optuna.load_study(study_name=study.study.name, storage=open_storage(study.storage_url))
    except KeyError:
        return None
    trials = ostudy.get_trials(deepcopy=False)
    return trials[-1] if trials else None


def _fmt(v: Any, digits: int = 1) -> str:
    return "-" if not isinstance(v, (int, float)) else f"{v:,.{digits}f}"


def print_table(results: list[dict[str, Any]]) -> None:
    head = f"{'mode':<15}{'samples/s':>11}{'tokens/s':>11}{'train s':>9}{'load s':>8}{'peak MB':>9}  outcome"
    print(head)
    print("-" * len(head))
    for r in results:
        print(f"{r['label']:<15}{_fmt(r.get('samples_per_second')):>11}{_fmt(r.get('tokens_per_second'), 0):>11}"
              f"{_fmt(r.get('train_seconds')):>9}{_fmt(r.get('load_seconds')):>8}{_fmt(r.get('peak_memory_mb'), 0):>9}"
              f"  {r.get('outcome') or 'exit ' + str(r['exit_code'])}")
    by = {r["mode"]: r.get("samples_per_second") for r in results}
    if isinstance(by.get("hf"), (int, float)) and isinstance(by.get("vllm"), (int, float)) and by["hf"]:
        print(f"vLLM colocate / HF generate samples/s: {by['vllm'] / by['hf']:.2f}x")


def environment(cpu: bool) -> dict[str, Any]:
    import importlib.metadata as md

    import torch

    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__}
    for name in ("trl", "transformers", "vllm"):
        try:
            info[name] = md.version(name)
        except md.PackageNotFoundError:
            info[name] = None
    if not cpu and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = torch.version.cuda
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="where studies, logs and gpu_smoke.json go (default: a temp folder)")
    parser.add_argument("--modes", default="hf,vllm", help="comma-separated, from: hf, vllm (default both)")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps per trial (default 20)")
    parser.add_argument("--cpu", action="store_true", help="check the plumbing on a CPU (HF mode only, float32)")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for everything (default 300)")
    parser.add_argument("--no-preflight", action="store_true", help="skip probe + advise on the same model")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown or not modes:
        parser.error(f"--modes takes {', '.join(MODES)}; got {args.modes!r}")

    import torch

    if args.cpu:
        if "vllm" in modes:
            parser.error("vLLM colocate needs a CUDA GPU: use --modes hf with --cpu")
    elif not torch.cuda.is_available():
        print("gpu_smoke: no CUDA GPU visible (torch.cuda.is_available() is False); "
              "run it on a GPU machine, or with --cpu --modes hf to check the plumbing", file=sys.stderr)
        return 2
    if "vllm" in modes:
        try:
            import vllm  # noqa: F401
        except ImportError:
            print("gpu_smoke: vLLM is not installed: pip install 'grpo-ablate[gpu]' (or --modes hf)", file=sys.stderr)
            return 2

    out = args.out or Path(tempfile.mkdtemp(prefix="grpo-gpu-smoke-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    dtype = "float32" if args.cpu else "bfloat16"
    model = save_tiny_model(out / f"tiny-qwen2-{dtype}", dtype=dtype)
    print(f"gpu_smoke: model saved in {model}; studies in {out}")
    results = []
    for mode in modes:
        left = args.budget - (time.perf_counter() - started)
        if left <= 10:
            results.append({"mode": mode, "label": LABELS[mode], "exit_code": None, "error": "no time left"})
            continue
        print(f"gpu_smoke: {LABELS[mode]} ...", flush=True)
        try:
            results.append(run_mode(out, mode, model, args.steps, args.cpu, timeout=left))
        except subprocess.TimeoutExpired:
            results.append({"mode": mode, "label": LABELS[mode], "exit_code": None,
                            "error": f"did not finish within the {args.budget:.0f} s budget"})
    preflight = None
    left = args.budget - (time.perf_counter() - started)
    if not args.no_preflight and left > 10:
        print("gpu_smoke: probe + advise ...", flush=True)
        try:
            preflight = run_preflight(out, model, args.cpu, "vllm" in modes, timeout=left)
        except subprocess.TimeoutExpired:
            preflight = {"mode": "preflight", "label": "probe + advise", "error": "no time left in the budget"}
        results.append(preflight)
    total = time.perf_counter() - started
    print_table([r for r in results if r is not preflight])
    if preflight is not None and not preflight.get("error"):
        print(f"probe: {preflight['probe_points']} points in {preflight['probe_processes']} process(es), "
              f"{preflight['probe_seconds']} s, {preflight['memory_kind']} memory, largest batch per G {preflight['best']}; "
              f"advise: {preflight['advise_seconds']} s with {preflight['advise_backend']}")
    print(f"gpu_smoke: {total:.0f} s in all")
    report = {"results": results, "total_seconds": round(total, 1), "steps": args.steps,
              "environment": environment(args.cpu)}
    (out / "gpu_smoke.json").write_text(json.dumps(report, indent=2))
    print(f"gpu_smoke: wrote {out / 'gpu_smoke.json'}")
    failed = [r for r in results if r.get("error")]
    for r in failed:
        print(f"gpu_smoke: {r['label']} failed: {r['error'][:1500]}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
