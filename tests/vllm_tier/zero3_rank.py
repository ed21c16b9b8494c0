"""One rank of test_zero3_memory.py: build a trial the way the trial process does, then say what this rank holds.

    python -m accelerate.commands.launch --num_processes 2 --config_file sweeps/accelerate/zero3.yaml \
        tests/vllm_tier/zero3_rank.py MODEL_FOLDER OUT_FOLDER

Each rank calls trainer/build.py's build_trial (GRPOConfig, and with it accelerate's DeepSpeed plugin,
before the model is loaded) on a spec of the model folder, and writes OUT_FOLDER/rank<R>.json: its
resident and private (USS) memory before and after (gc and malloc_trim first), the parameter bytes this rank holds (a ZeRO-3 shard's ds_tensor,
else the whole tensor) and the whole model's parameter bytes.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import sys
from pathlib import Path

import psutil


def main() -> int:
    folder, out, config = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    rank = int(os.environ.get("RANK", "0"))
    proc = psutil.Process()
    # everything build_trial imports, imported first: the memory measured is the trial's, not the libraries'
    import deepspeed  # noqa: F401
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401
    from transformers.integrations import is_deepspeed_zero3_enabled
    from trl import GRPOConfig, GRPOTrainer  # noqa: F401

    from grpo_ablate.study.trial_spec import spec_from_sections
    from grpo_ablate.trainer.build import build_trial
    from grpo_ablate.trainer.scheduled import ScheduledGRPOTrainer  # noqa: F401

    spec = spec_from_sections(
        out / f"trial-{rank}",
        model={"name_or_path": folder, "dtype": "float32"},
        data={"task": "addition", "num_prompts": 64},
        rewards=["addition"],
        trainer={"per_device_train_batch_size": 4, "max_completion_length": 4, "beta": 0.0,
                 "gradient_checkpointing": False, "report_to": "none"},
        budget={"max_steps": 1},
        hardware={"num_processes": 2, "accelerate_config": config},
        params={"num_generations": 4},
    )
    trim = ctypes.CDLL("libc.so.6").malloc_trim  # glibc keeps freed heap pages; handed back, RSS shows what is held
    gc.collect()
    trim(0)
    before, private_before = proc.memory_info().rss, proc.memory_full_info().uss
    built = build_trial(spec, log=lambda m: None, echo=False)
    gc.collect()
    trim(0)
    after, private_after = proc.memory_info().rss, proc.memory_full_info().uss
    params = list(built.trainer.model.parameters())
    local = sum((p.ds_tensor if hasattr(p, "ds_tensor") else p).numel() * p.element_size() for p in params)
    whole = sum((p.ds_numel if hasattr(p, "ds_numel") else p.numel()) * p.element_size() for p in params)
    (out / f"rank{rank}.json").write_text(json.dumps({
        "rank": rank, "zero3": is_deepspeed_zero3_enabled(), "rss_before": before, "rss_after": after,
        "private_before": private_before, "private_after": private_after,
        "local_param_bytes": local, "whole_param_bytes": whole}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
