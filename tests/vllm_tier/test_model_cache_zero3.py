"""The built-in model is never built under a live ZeRO-3 config (issue 52 item 5).

Round 5 found `tiny-vllm-addition-<key>/` published without config.json and model.safetensors after a cold-cache run
of this tier: a process where a stage-3 HfDeepSpeedConfig is alive partitions what transformers builds, and saves
empty placeholders for its weights. Here such a config is alive (DeepSpeed installed, as this tier has it) in a
process with an empty cache: the model is built in a child process, whole, and found whole again.
"""

from __future__ import annotations

from grpo_ablate.trainer.builtin import model


def test_a_build_under_a_live_zero3_config_happens_in_a_child_and_is_published_whole(tmp_path, monkeypatch,
                                                                                     needs_deepspeed):
    from transformers.integrations import HfDeepSpeedConfig

    monkeypatch.setenv("GRPO_ABLATE_CACHE", str(tmp_path / "empty-cache"))
    alive = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    assert model._partitioning()
    said: list[str] = []
    path = model.builtin_model_path("builtin:tiny-untrained", "addition", log=said.append)
    assert said[0] == "building the built-in model in a child process: a ZeRO-3 config is alive in this one", said
    assert model.entry_problem(path) is None
    assert model.builtin_model_path("builtin:tiny-untrained", "addition", log=said.append) == path  # found, not rebuilt
    del alive
