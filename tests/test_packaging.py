"""grpo-ablate as a user installs it: a wheel built from this checkout, installed into a virtualenv of its own
and run from a folder outside the checkout (issue 53).

    pytest tests/test_packaging.py

The wheel is built offline with the environment's setuptools (`pip wheel --no-build-isolation`, from a copy of
the sources, so the checkout gets no build/ or egg-info) and installed with `--no-deps --no-index` into a scratch
virtualenv whose dependencies are this environment's (a .pth line: the folder is added to the path, and the
editable install's own .pth files in it are not processed, so `import grpo_ablate` finds the wheel's copy only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT, TINY_CPU, cli_env

pytestmark = pytest.mark.slow

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "grpo_ablate")


def _run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env or cli_env(), capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """(the wheel, everything its build printed)."""
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(
            ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if (ROOT / name).is_dir() else {}))
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
                 "dist", ".", cwd=src)
    assert built.returncode == 0, built.stderr
    (whl,) = (src / "dist").glob("grpo_ablate-*.whl")
    return whl, built.stdout + built.stderr


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A scratch virtualenv holding the wheel (nothing else installed in it); its folder."""
    venv = tmp_path_factory.mktemp("venv")
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv)
    assert made.returncode == 0, made.stderr
    site = Path(_run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                     cwd=venv).stdout.strip())
    (site / "deps-from-the-test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = _run(sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps", "--no-index",
                wheel[0], cwd=venv)
    assert done.returncode == 0, done.stderr
    return venv


def test_the_build_prints_no_warning_of_its_own(wheel):
    """setuptools warned four times per install while project.license was a table (deprecated since setuptools 77)."""
    _, said = wheel
    lowered = said.lower()
    assert "warning" not in lowered and "deprecat" not in lowered, said


def test_the_wheel_ships_every_file_the_package_reads_at_run_time_and_its_license(wheel):
    names = set(zipfile.ZipFile(wheel[0]).namelist())
    for shipped in ("grpo_ablate/report/template.html.j2", "grpo_ablate/trl_facts/trl_defaults.json",
                    "grpo_ablate/commands/grpo-ablate-array.sbatch"):
        assert shipped in names, shipped
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    metadata = next(zipfile.ZipFile(wheel[0]).read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in metadata


def test_slurm_script_works_from_the_installed_wheel_outside_the_checkout(installed, tmp_path):
    study = tmp_path / "study.yaml"
    shutil.copy(TINY_CPU, study)
    env = cli_env()
    env.pop("PYTHONPATH", None)  # nothing of the checkout on the path
    where = _run(installed / "bin" / "python", "-c", "import grpo_ablate; print(grpo_ablate.__file__)", cwd=tmp_path,
                 env=env)
    assert Path(where.stdout.strip()).is_relative_to(installed), where  # the wheel's copy, not the checkout's
    out = _run(installed / "bin" / "grpo-ablate", "slurm-script", study, "--workers", "2", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    script = out.stdout
    assert script.startswith("#!/usr/bin/env bash") and "#SBATCH --cpus-per-task=2" in script
    assert '"${GRPO_ABLATE_WORKERS:-2}"' in script
    assert ROOT.as_posix() not in script + out.stderr


def test_the_checkout_path_to_the_array_script_is_the_shipped_file():
    """sweeps/slurm/grpo-ablate-array.sbatch (the path the SLURM docs and tests give) is a link to the package's copy."""
    link = ROOT / "sweeps" / "slurm" / "grpo-ablate-array.sbatch"
    assert link.is_symlink() and link.resolve() == (ROOT / "grpo_ablate" / "commands" / "grpo-ablate-array.sbatch")
    assert os.access(link, os.R_OK)
