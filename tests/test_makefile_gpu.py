"""`make install` picks the GPU extras where nvidia-smi exists and the CPU torch elsewhere (issue 19, item 1).

The Makefile really runs; pip is the one stand-in: the virtualenv's `python` is a script that
logs its arguments, so nothing is installed. A fake `nvidia-smi` on PATH makes a GPU machine.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _install(tmp_path: Path, *, gpu: bool, **variables: str) -> list[str]:
    if shutil.which("make") is None or shutil.which("nvidia-smi") is not None:
        pytest.skip("needs make, and a machine without a real nvidia-smi")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "pip.log"
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    path = os.environ["PATH"]
    if gpu:
        fake = tmp_path / "gpu-bin"
        fake.mkdir()
        smi = fake / "nvidia-smi"
        smi.write_text("#!/bin/sh\nexit 0\n")
        smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
        path = f"{fake}{os.pathsep}{path}"
    args = ["make", "-s", "install", f"VENV={venv}", *(f"{k}={v}" for k, v in variables.items())]
    proc = subprocess.run(args, cwd=ROOT, env={**os.environ, "PATH": path}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return log.read_text().splitlines()


def test_gpu_machine_installs_the_gpu_extra(tmp_path):
    lines = _install(tmp_path, gpu=True)
    assert any("-e .[dev,gpu]" in ln for ln in lines), lines
    assert not any("torch==" in ln for ln in lines)  # vLLM's own CUDA torch, not the CPU build
    assert not any("flash-attn" in ln for ln in lines)  # opt-in: FLASH_ATTN=1


def test_flash_attn_is_opt_in_without_build_isolation(tmp_path):
    lines = _install(tmp_path, gpu=True, FLASH_ATTN="1")
    assert any("install flash-attn --no-build-isolation" in ln for ln in lines), lines


def test_cpu_machine_keeps_the_cpu_torch_and_dev_extra(tmp_path):
    lines = _install(tmp_path, gpu=False)
    assert any('torch==' in ln for ln in lines) and any("-e .[dev]" in ln for ln in lines), lines
    assert not any("gpu" in ln for ln in lines)
