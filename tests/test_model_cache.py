"""The built-in model's cache checks what it publishes and repairs what it finds (issue 52 item 5).

Round 5 found `tiny-vllm-addition-<key>/` published with only its tokenizer files and its info file (no
config.json, no model.safetensors); every later build then saw no config.json, built again, and failed on the
rename with ENOTEMPTY. Now a cached folder is checked whole each time it is used (trainer/builtin/model.py
`entry_problem`), one that fails is moved aside with a line saying why and built again, and a build is
published only after the same check passed and a manifest of its files was written.

Each test builds `builtin:tiny-untrained` (a seeded random model: seconds) in a cache of its own.
"""

from __future__ import annotations

import json

import pytest

from grpo_ablate.trainer.builtin import model


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_ABLATE_CACHE", str(tmp_path / "cache"))
    label, settings, _ = model._settings("builtin:tiny-untrained", "addition")
    return model.cache_root() / "models" / f"{label}-{model._cache_key(settings)}"


def _build(said: list[str]):
    return model.builtin_model_path("builtin:tiny-untrained", "addition", log=said.append)


def test_a_build_is_published_whole_with_a_manifest_of_its_files(cache):
    said: list[str] = []
    assert _build(said) == cache and model.entry_problem(cache) is None
    manifest = json.loads((cache / model.MANIFEST_FILE).read_text())["files"]
    assert set(model.REQUIRED_FILES) <= set(manifest) and all(v["size"] > 0 for v in manifest.values())
    assert not [p for p in cache.parent.iterdir() if p.name.startswith(".")]  # no staging folder left behind
    again: list[str] = []
    assert _build(again) == cache and again == []  # found, checked, not built again


def test_the_folder_round_5_found_without_its_weights_is_moved_aside_and_rebuilt(cache):
    _build([])
    for name in ("config.json", "model.safetensors", "generation_config.json", model.MANIFEST_FILE):
        (cache / name).unlink()  # what was seen: tokenizer.json, tokenizer_config.json, grpo_ablate_builtin.json
    assert model.entry_problem(cache) == "config.json is missing"
    said: list[str] = []
    assert _build(said) == cache and model.entry_problem(cache) is None  # no ENOTEMPTY: the broken one moved first
    assert said[0].startswith(f"the cached built-in model {cache} is not whole (config.json is missing): moved aside")
    aside = [p for p in cache.parent.iterdir() if ".broken-" in p.name]
    assert len(aside) == 1 and sorted(q.name for q in aside[0].iterdir()) == [
        "grpo_ablate_builtin.json", "tokenizer.json", "tokenizer_config.json"]  # kept for a look


@pytest.mark.parametrize("damage", ["zeroed", "truncated", "emptied tensor"])
def test_weights_damaged_after_publication_fail_the_check_and_are_rebuilt(cache, damage):
    _build([])
    weights = cache / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "zeroed":  # the same size: only the manifest's hash can tell
        head = 8 + int.from_bytes(data[:8], "little")
        data[head:] = bytes(len(data) - head)
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:  # a header naming an empty tensor: what a ZeRO-3 partitioned parameter saves as
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        name = next(k for k in header if k != "__metadata__")
        header[name]["shape"] = [0]
        text = json.dumps(header).encode()
        data = bytearray(len(text).to_bytes(8, "little")) + text + data[8 + n:]
    weights.write_bytes(bytes(data))
    why = model.entry_problem(cache)
    assert why is not None, damage
    said: list[str] = []
    assert _build(said) == cache and model.entry_problem(cache) is None
    assert f"is not whole ({why})" in said[0]


def test_a_build_that_writes_no_weights_publishes_nothing(cache, monkeypatch):
    """The publish step's own check: a save that left model.safetensors out (as under a partitioning context) fails
    the build and leaves no folder at the cache's name for the next run to trust."""
    real = model.build_tiny_model

    def without_weights(tokenizer, *settings):
        built = real(tokenizer, *settings)
        built.save_pretrained = lambda folder, **kw: built.config.save_pretrained(folder)  # config only, as was seen
        return built

    monkeypatch.setattr(model, "build_tiny_model", without_weights)
    with pytest.raises(RuntimeError, match=r"built incompletely \(model.safetensors is missing\); nothing was published"):
        _build([])
    assert not cache.exists() and not [p for p in cache.parent.iterdir() if p.is_dir()]
