"""The GPU-facing configuration, checked on CPU: the gpu extra's pins, attention without hub
kernels, and the Open R1 recipe's pinned TRL-0.18 values (issue 19, items 1, 2 and 10).

The pins themselves are resolved by pip in benchmarks/check_gpu_pins.py (two minutes and a
package index, so a script rather than a test); here its verdict is tested on values.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from grpo_ablate.config import load_study
from grpo_ablate.core.attention import FLASH_INSTALL, attn_problems, resolve_attn
from grpo_ablate.core.errors import StudyError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import check_gpu_pins  # noqa: E402


def test_gpu_extra_pins_a_vllm_trl_accepts_and_leaves_flash_attn_out():
    from packaging.requirements import Requirement

    extra = {Requirement(r).name: Requirement(r) for r in check_gpu_pins.gpu_extra()}
    assert "flash-attn" not in extra and "flash_attn" not in extra
    vllm = extra["vllm"]
    (pin,) = [s.version for s in vllm.specifier if s.operator == "=="]
    from packaging.specifiers import SpecifierSet

    assert pin in SpecifierSet(check_gpu_pins.trl_vllm_range())  # read from the installed TRL's metadata
    assert "transformers" in extra and "deepspeed" in extra


def test_pin_check_verdicts_on_values():
    extra = ["vllm==0.31.0", "transformers>=5.10.4,<5.18", "deepspeed>=0.18.6"]
    good = check_gpu_pins.check({"vllm": "0.31.0", "transformers": "5.17.0", "torch": "2.13.0"}, extra, ">=0.22.0,<=0.31.0")
    assert all(r["pass"] for r in good)
    bad = check_gpu_pins.check({"vllm": "0.33.0", "transformers": "5.24.0"}, extra + ["flash-attn"], ">=0.22.0,<=0.31.0")
    assert [r["pass"] for r in bad] == [False, False, False]


def test_auto_attention_is_sdpa_without_flash_attn():
    assert resolve_attn("auto", False) == "sdpa"
    assert resolve_attn("auto", True) == "flash_attention_2"
    assert resolve_attn("eager", False) == "eager" and resolve_attn(None, False) is None


def test_flash_attention_without_the_package_names_it_and_the_command():
    (msg,) = attn_problems("flash_attention_2", installed=lambda package: False)
    assert "flash_attn" in msg and FLASH_INSTALL in msg and "auto" in msg
    assert attn_problems("flash_attention_2", installed=lambda package: True) == []
    assert attn_problems("sdpa") == [] and attn_problems("auto") == []
    (hub,) = attn_problems("kernels-community/flash-attn")
    assert "hub" in hub


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash_attn is installed here")
def test_validate_refuses_flash_attention_here(tmp_path):
    study = (ROOT / "studies" / "tiny-cpu.yaml").read_text().replace(
        "  name_or_path: builtin:tiny\n", "  name_or_path: builtin:tiny\n  attn_implementation: flash_attention_2\n")
    path = tmp_path / "s.yaml"
    path.write_text(study)
    with pytest.raises(StudyError) as err:
        load_study(path)
    text = str(err.value)
    assert "model.attn_implementation" in text and "--no-build-isolation" in text


@pytest.mark.parametrize("name", ["qwen2.5-0.5b-gsm8k.yaml", "openr1-1.5b-numina-8gpu.yaml"])
def test_shipped_gpu_studies_use_auto_attention(name):
    study = load_study(ROOT / "studies" / name)  # validates here, where flash_attn is absent
    assert study.file.model.attn_implementation == "auto"


def test_openr1_recipe_pins_the_trl_018_values():
    study = load_study(ROOT / "studies" / "openr1-1.5b-numina-8gpu.yaml")
    trainer = study.file.trainer
    assert trainer["beta"] == 0.04 and trainer["loss_type"] == "bnpo"  # TRL 1.16's defaults are 0.0 and "dapo"
    assert study.file.data.max_prompt_tokens == 512
