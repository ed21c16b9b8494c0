"""The GPU smoke run (benchmarks/gpu_smoke.py) as tests.

- gpu: on a CUDA machine with the gpu extra, every check passes within the 8-minute budget
  (skipped without CUDA; CI never runs it). It has not run on a GPU in the session that wrote it;
- fast, on CPU: the registry, the JSON line format, the skip rule, and every study the smoke
  writes validates through the real `validate`;
- slow, on CPU: attention and the trial with an evaluation section and a schedule, the trial
  end to end through the real CLI. The other checks that run without a GPU (server, probe, advise on vLLM's
  CPU build) run in the vLLM tier (tests/vllm_tier/test_gpu_smoke_on_vllm_cpu.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import ROOT, cli_env

SCRIPT = ROOT / "benchmarks" / "gpu_smoke.py"
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_smoke  # noqa: E402


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_registry_names_each_check_once_with_known_needs():
    assert list(gpu_smoke.CHECKS) == ["attention", "cuda_oom", "trial", "server", "workers", "probe", "probe_oom", "advise"]
    for name, check in gpu_smoke.CHECKS.items():
        assert check.needs <= {"cuda", "vllm"}, name
        assert 0 < check.limit_s <= gpu_smoke.BUDGET_S and f"- {name}:" in gpu_smoke.__doc__, name
    # the server runs on vLLM's CPU build too (make test-vllm); only the CUDA OOM needs a GPU
    assert gpu_smoke.CHECKS["server"].needs == {"vllm"} and gpu_smoke.CHECKS["cuda_oom"].needs == {"cuda"}
    assert gpu_smoke.BUDGET_S <= 480


def test_a_line_is_one_json_object_with_check_pass_seconds():
    text = gpu_smoke.line("trial", True, 12.345, steps=6, eval_points=3)
    assert "\n" not in text
    assert json.loads(text) == {"check": "trial", "pass": True, "seconds": 12.3, "steps": 6, "eval_points": 3}
    assert json.loads(gpu_smoke.line("server", None, 0.0, skipped="needs cuda"))["pass"] is None
    with pytest.raises(ValueError, match="seconds"):
        gpu_smoke.line("probe", True, 1.0, seconds=3)  # a figure may not shadow the line's own keys


def test_missing_needs():
    assert gpu_smoke.missing(frozenset({"cuda", "vllm"}), cuda=False, vllm=False) == ["cuda", "vllm"]
    assert gpu_smoke.missing(frozenset({"cuda"}), cuda=True, vllm=False) == []


@pytest.mark.parametrize("cpu", [True, False], ids=["cpu", "gpu"])
def test_every_smoke_study_validates(tmp_path, cpu):
    from grpo_ablate.config import load_study

    model = tmp_path / "model"
    variants = [
        gpu_smoke.study_dict("t", tmp_path, model, cpu=cpu, vllm=not cpu, num_generations=[gpu_smoke.SCHEDULE], evaluation=True),
        gpu_smoke.study_dict("w", tmp_path, model, cpu=cpu, vllm=not cpu, num_generations=[4, 8], steps=4, memory=0.15, workers=2),
        gpu_smoke.study_dict("p", tmp_path, model, cpu=cpu, vllm=False, num_generations=[8]),
    ]
    for study in variants:
        loaded = load_study(gpu_smoke.write_study(tmp_path, study))
        assert loaded.file.model.attn_implementation == "auto"
        if not cpu and study["study"]["name"] != "p":
            assert loaded.file.hardware.vllm.mode == "colocate"
    trial = variants[0]
    assert trial["trainer"].get("vllm_enable_sleep_mode", False) is (not cpu) and trial["evaluation"]["num_prompts"] == 32


def test_gpu_only_checks_are_skipped_lines_on_a_cpu(tmp_path):
    lines: list[str] = []
    results = gpu_smoke.run(["cuda_oom", "server"], tmp_path, cpu=True, emit=lines.append)
    assert [r["check"] for r in results] == ["cuda_oom", "server", "summary"]
    assert [r["pass"] for r in results[:2]] == [None, None] and results[0]["skipped"] == "needs cuda"
    assert results[1]["skipped"] == "needs vllm"  # this virtualenv has no vLLM (the vLLM tier's has)
    assert results[-1]["skipped"] == ["cuda_oom", "server"] and results[-1]["pass"] is False  # nothing ran
    assert (tmp_path / "gpu_smoke.jsonl").read_text().splitlines() == lines


@pytest.mark.slow
def test_smoke_plumbing_on_cpu(tmp_path, capsys):
    """The script's main in this process (the pytest worker has torch imported already); the
    trial check's study through the real CLI, as on a GPU."""
    code = gpu_smoke.main(["--cpu", "--checks", "attention,trial", "--budget", "840", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    rows = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    assert code == 0, out[-4000:] + err[-3000:]
    by = {x["check"]: x for x in rows}
    assert by["attention"]["attn_implementation"] == "sdpa"
    trial = by["trial"]
    assert trial["eval_points"] >= 3 and trial["num_generations"][0] == 4 and trial["num_generations"][-1] == 8
    assert by["summary"]["pass"] is True and by["summary"]["checks_failed"] == 0


@pytest.mark.gpu
def test_gpu_smoke_every_check_passes_within_its_device_budget(tmp_path):
    if not _cuda():
        pytest.skip("needs a CUDA GPU")
    pytest.importorskip("vllm", reason="needs vLLM (pip install 'grpo-ablate[gpu]')")
    # the device budget is the bound: a run that does not fit is killed here and fails (TimeoutExpired)
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True,
                       cwd=ROOT, env=cli_env(), timeout=540)
    print(r.stdout)
    rows = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    failed = [x for x in rows if x["pass"] is False]
    assert r.returncode == 0 and not failed, failed or r.stderr[-3000:]
    assert {x["check"] for x in rows} == set(gpu_smoke.CHECKS) | {"summary"}
