"""Check that `pip install 'grpo-ablate[gpu]'` can resolve, without installing anything.

    python benchmarks/check_gpu_pins.py            # one JSON line; exit 0 when every check passes

pip's own resolver (`pip install --dry-run --ignore-installed --report`) resolves the project
with its gpu extra for this interpreter and platform, so a GPU machine gets the same answer (the
wheels are the same manylinux ones; deepspeed is an sdist whose metadata builds without torch).
The report is then checked against what the pins exist for:

- vLLM lies in the range the installed TRL accepts (read from TRL's own metadata, its `vllm`
  extra), so TRL does not refuse the engine at import;
- the resolved transformers satisfies vLLM's requirement and the project's (pip guarantees it;
  the figure is printed so a reader sees which transformers a GPU machine gets);
- flash-attn is not part of the extra (its build needs `--no-build-isolation`, see docs/gpus.md).

It needs a package index (PyPI); without one it says so and exits 2.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["gpu_extra", "resolve", "check", "main"]


def gpu_extra(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The requirement strings of the project's gpu extra."""
    import tomllib

    return list(tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["gpu"])


def trl_vllm_range() -> str:
    """The vLLM specifier the installed TRL declares for its `vllm` extra (e.g. '<=0.31.0,>=0.22.0')."""
    for line in metadata.requires("trl") or []:
        req = Requirement(line)
        if req.name == "vllm" and req.marker is not None and req.marker.evaluate({"extra": "vllm"}):
            return str(req.specifier)
    raise LookupError("the installed TRL declares no vllm extra")


def resolve(requirements: list[str], *, timeout: float = 600.0) -> dict[str, str]:
    """{package name (lower case): version} that pip would install for `requirements`, nothing installed."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
               "--report", str(report), *requirements]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        if proc.returncode != 0 or not report.exists():
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.startswith("ERROR")]
            raise RuntimeError("pip could not resolve the gpu extra: " + (" | ".join(lines[-3:]) or proc.stderr[-500:]))
        data = json.loads(report.read_text())
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in data["install"]}


def check(resolved: dict[str, str], extra: list[str], vllm_range: str) -> list[dict[str, object]]:
    """One {check, pass, ...} per rule above, from a resolution (pure: tested on values)."""
    from packaging.specifiers import SpecifierSet

    out: list[dict[str, object]] = []
    vllm = resolved.get("vllm")
    ok = vllm is not None and Version(Version(vllm).base_version) in SpecifierSet(vllm_range)
    out.append({"check": "vllm_in_trl_range", "pass": ok, "vllm": vllm, "trl_accepts": vllm_range})
    transformers = resolved.get("transformers")
    wanted = [Requirement(r) for r in extra if Requirement(r).name == "transformers"]
    ok = transformers is not None and all(Version(transformers) in r.specifier for r in wanted)
    out.append({"check": "transformers_in_range", "pass": ok, "transformers": transformers,
                "torch": resolved.get("torch"), "extra_range": [str(r.specifier) for r in wanted]})
    names = {Requirement(r).name.lower() for r in extra}
    out.append({"check": "flash_attn_outside_extra", "pass": "flash-attn" not in names and "flash_attn" not in names})
    return out


def main() -> int:
    started = time.perf_counter()
    extra = gpu_extra()
    try:
        resolved = resolve([f"{ROOT}[gpu]"])
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(json.dumps({"check": "resolve_gpu_extra", "pass": False, "error": str(exc)[:1000]}))
        return 2
    results = check(resolved, extra, trl_vllm_range())
    for row in results:
        print(json.dumps(row))
    print(json.dumps({"check": "resolve_gpu_extra", "pass": True, "packages": len(resolved),
                      "seconds": round(time.perf_counter() - started, 1)}))
    return 0 if all(r["pass"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
