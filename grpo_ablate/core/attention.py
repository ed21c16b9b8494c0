"""Which attention kernel a trial's model loads with, decided so that nothing fetches one from the hub.

transformers 5 treats `flash_attention_2` without the `flash_attn` package as a request for a
kernel from the hub (when the `kernels` package is installed) and fails offline or behind a
firewall. So a study says `model.attn_implementation: auto` (what the shipped GPU studies say):
flash_attention_2 when flash_attn imports on the trial's machine, else PyTorch's sdpa. A study
that names flash_attention_2/3 itself gets it, and `validate` refuses it where flash_attn is not
installed, naming the package and the command; a hub kernel ("org/repo") is refused outright.

    grpo-ablate validate studies/qwen2.5-0.5b-gsm8k.yaml

Only the standard library: the orchestrator checks with find_spec (no torch import); the trial
process decides with a real import (a flash_attn built against another torch fails there).
"""

from __future__ import annotations

import importlib.util

__all__ = ["AUTO", "FLASH_INSTALL", "attn_problems", "flash_attn_imports", "flash_attn_installed", "resolve_attn"]

AUTO = "auto"
FLASH_INSTALL = "pip install flash-attn --no-build-isolation"
_FLASH = {"flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn_interface"}


def resolve_attn(requested: str | None, flash_ok: bool) -> str | None:
    """The attn_implementation to load with: `auto` -> flash_attention_2 if flash_ok else sdpa; others as given."""
    if requested == AUTO:
        return "flash_attention_2" if flash_ok else "sdpa"
    return requested


def flash_attn_installed(package: str = "flash_attn") -> bool:
    """Whether the package is on the path (no import: the orchestrator never imports torch)."""
    return importlib.util.find_spec(package) is not None


def flash_attn_imports(package: str = "flash_attn") -> bool:
    """Whether the package really imports here (trial side: a wrong build raises at import)."""
    try:
        importlib.import_module(package)
    except Exception:  # noqa: BLE001 - ImportError, or an undefined-symbol OSError of a mismatched build
        return False
    return True


def attn_problems(requested: str | None, installed=flash_attn_installed) -> list[str]:
    """What is wrong with model.attn_implementation on this machine (empty: fine)."""
    if not requested or requested == AUTO:
        return []
    if "/" in requested:
        return [f"{requested!r} is a kernel fetched from the hub at run time, and trials never fetch kernels; "
                f"use `auto` (flash_attention_2 when flash_attn is installed, else sdpa), or install flash-attn "
                f"({FLASH_INSTALL}) and use flash_attention_2"]
    package = _FLASH.get(requested)
    if package is not None and not installed(package):
        return [f"{requested} needs the {package} package, which is not installed (transformers would fetch a kernel "
                f"from the hub instead); install it with `{FLASH_INSTALL}` after the gpu extra, or use `auto` "
                f"(sdpa without it)"]
    return []
