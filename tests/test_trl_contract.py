"""The private TRL and vLLM-engine members grpo-ablate uses are the ones they were checked against.

    pytest tests/test_trl_contract.py

Every such access lives in grpo_ablate/trainer/trl_adapter.py (the overrides of the G-schedule
trainer, trainer/scheduled.py, are a subclass's and are listed there too, member by member: no
blanket exemption for the subclass). TRL may change any of them in a minor release without a word;
a G policy built on the old behaviour would then train with a wrong grouping and still finish. So
the source of each overridden or wrapped method and of each private TRL function called is hashed,
per TRL version (trl_adapter.CHECKED), and each private attribute must still be set and used where
the adapter expects: an upgrade of TRL fails here, by name, until someone has re-read
the changed members and recorded the new version. The run-time gate (trl_adapter.gate) reads the
same table, so an unchecked TRL refuses or degrades loudly in a real trial too.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

trl = pytest.importorskip("trl")

from grpo_ablate.trainer import trl_adapter  # noqa: E402  (after the importorskip)

ROOT = Path(__file__).resolve().parents[1]


HASHED = [*trl_adapter.OVERRIDDEN, *trl_adapter.FUNCTIONS]  # what CHECKED records per version


def _installed() -> dict[str, str]:
    return {name: trl_adapter.source_hash(trl_adapter.checked_member(name)) for name in HASHED}


def test_the_installed_trl_private_methods_are_the_ones_the_adapter_was_checked_against():
    version = trl.__version__
    installed = _installed()
    checked = trl_adapter.CHECKED.get(version)
    if checked is None:
        pytest.fail(
            f"TRL {version} is not in grpo_ablate/trainer/trl_adapter.py's CHECKED table. ScheduledGRPOTrainer "
            "(trainer/scheduled.py) overrides private GRPOTrainer methods and the adapter wraps one; re-read each "
            "against what they assume, run tests/test_schedule_e2e.py and tests/test_g_policy_e2e.py, then add\n"
            f"    {version!r}: {installed!r},\n"
            "to CHECKED. What to re-check:\n" + "\n".join(f"  - {m}: {why}" for m, why in _relied_on().items()),
            pytrace=False)
    changed = [m for m in HASHED if installed[m] != checked[m]]
    if changed:
        pytest.fail(
            f"TRL {version}'s source differs from the hashes recorded for it in CHECKED: "
            + ", ".join(changed) + ". The adapter and scheduled.py rely on:\n"
            + "\n".join(f"  - {m}: {_relied_on()[m]}" for m in changed)
            + f"\nRe-check them, then record the new hashes {({m: installed[m] for m in changed})!r}.", pytrace=False)
    assert trl_adapter.support().ok  # and the run-time gate agrees: nothing refused or degraded here


def _relied_on() -> dict[str, str]:
    return {**trl_adapter.OVERRIDDEN, **trl_adapter.FUNCTIONS}


def test_the_pinned_trl_range_is_the_checked_minor():
    """pyproject pins the minor whose hashes were checked: an unchecked TRL is not installed by accident."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if d.replace(" ", "").startswith("trl")]
    minors = {".".join(v.split(".")[:2]) for v in trl_adapter.CHECKED}
    assert any(pin.replace(" ", "") == f"trl>={m},<{m.split('.')[0]}.{int(m.split('.')[1]) + 1}" for m in minors), pin


def test_the_private_attributes_are_set_and_used_where_the_adapter_expects():
    from trl import GRPOTrainer
    from trl.generation.vllm_generation import VLLMGeneration

    init = inspect.getsource(GRPOTrainer.__init__)
    trainer = inspect.getsource(GRPOTrainer)
    engine = inspect.getsource(VLLMGeneration)
    for owner, name in trl_adapter.PRIVATE_ATTRIBUTES:
        source = init if owner == "GRPOTrainer" else engine
        assert f"self.{name} =" in source, (f"TRL {trl.__version__}'s {owner} no longer sets {name}; "
                                            f"{trl_adapter.PRIVATE_ATTRIBUTES[(owner, name)]}")
    prepare = inspect.getsource(GRPOTrainer._prepare_inputs)
    assert "self._step" in prepare and "self._buffered_inputs" in prepare, (
        "GRPOTrainer._prepare_inputs no longer counts self._step or buffers self._buffered_inputs; "
        "ScheduledGRPOTrainer._prepare_inputs decides when a round starts from them")
    assert f"generation_batch = self.{trl_adapter.TIMED}(generation_batch)" in prepare, (
        f"GRPOTrainer._prepare_inputs no longer generates a round with one {trl_adapter.TIMED} call before "
        "buffering it: trl_adapter.time_rollouts times a round by that call")
    score = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "frac_reward_zero_std" in score and "self._metrics" in score, (
        "GRPOTrainer._generate_and_score_completions no longer logs frac_reward_zero_std in self._metrics; "
        "ScheduledGRPOTrainer._per_prompt_round overwrites that entry")
    # groups.jsonl's recorder is a reward of weight 0 that returns None (rewards.GroupsRecorder): it changes nothing
    # only while TRL sums weighted rewards with nansum and calls a completion unscorable when every reward is NaN
    for line in ("(rewards_per_func * self.reward_weights.to(device).unsqueeze(0)).nansum(dim=1)",
                 "unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)"):
        assert line in score, f"TRL no longer aggregates rewards as {line!r}: the zero-weight groups recorder may move them"
    assert "reward if reward is not None else torch.nan" in inspect.getsource(GRPOTrainer._calculate_rewards), (
        "TRL no longer reads a reward's None as NaN: the groups recorder's None would then count")
    # the engine's weights: TRL syncs when the step moved, sleeps and marks them discarded, as evaluation mirrors
    assert "self._last_loaded_step = self.state.global_step" in trainer
    assert "self._dist.summon_full_params(self.model_wrapped, recurse=False)" in trainer
    assert "self._llm_weights_sleeping = True" in engine and "self._llm_weights_sleeping = False" in engine
    assert "self.llm.llm_engine.model_executor.driver_worker.model_runner" in engine, (
        "vLLM's model runner is no longer where TRL's sync_weights writes: trl_adapter.engine_memory_bytes reads it")


def test_the_table_names_exactly_the_methods_scheduled_py_overrides():
    """A new override in scheduled.py must join the contract (and a removed one leave it)."""
    from trl import GRPOTrainer

    from grpo_ablate.trainer.scheduled import ScheduledGRPOTrainer

    private_overrides = {name for name, value in vars(ScheduledGRPOTrainer).items()
                         if name.startswith("_") and not name.startswith("__") and callable(value) and hasattr(GRPOTrainer, name)}
    assert private_overrides == set(trl_adapter.OVERRIDDEN), (
        f"ScheduledGRPOTrainer overrides private GRPOTrainer methods {sorted(private_overrides)}, the contract table "
        f"lists {sorted(trl_adapter.OVERRIDDEN)}: add the new ones to OVERRIDDEN and CHECKED")
    assert trl_adapter.TIMED in trl_adapter.OVERRIDDEN
    for version, hashes in trl_adapter.CHECKED.items():
        assert set(hashes) == set(HASHED), version


def _private_trl_names() -> set[str]:
    """Private members of GRPOTrainer (and of TRL's vLLM generation) that are not also ours."""
    from trl import GRPOTrainer
    from trl.generation.vllm_generation import VLLMGeneration

    names = {n for n in dir(GRPOTrainer) if n.startswith("_") and not n.startswith("__")}
    for cls in (GRPOTrainer, VLLMGeneration):
        tree = ast.parse(inspect.getsource(cls).lstrip() if cls is VLLMGeneration else inspect.getsource(cls))
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
                  and not n.attr.startswith("__") and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return names | {"llm_engine", "model_executor", "driver_worker"}  # vLLM's engine internals


def _trainer_subclasses(tree: ast.Module) -> set[int]:
    """The ids of every node inside a class that subclasses GRPOTrainer (by name: `GRPOTrainer`, `trl.GRPOTrainer`)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b).split(".")[-1] == "GRPOTrainer" for b in node.bases):
            inside.update(id(n) for n in ast.walk(node))
    return inside


def test_no_private_trl_access_outside_the_adapter():
    """Every private TRL/vLLM member is reached through trainer/trl_adapter.py: an access on another object
    (`trainer._logs`, `vllm._llm_weights_sleeping`) anywhere else fails here. Inside a GRPOTrainer subclass
    (trainer/scheduled.py) `self._x` and `super()._x` of a TRL private name must be one the adapter lists: a
    method it overrides (OVERRIDDEN) or an attribute it reads (PRIVATE_ATTRIBUTES), each checked above; its own
    new members share no TRL name. Elsewhere `self._x` is one of our own classes' members."""
    private = _private_trl_names()
    listed = set(trl_adapter.OVERRIDDEN) | {name for _, name in trl_adapter.PRIVATE_ATTRIBUTES}
    allowed = {"grpo_ablate/trainer/trl_adapter.py"}
    bad = {}
    for path in sorted((ROOT / "grpo_ablate").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in allowed:
            continue
        tree = ast.parse(path.read_text())
        subclass = _trainer_subclasses(tree)
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in private:
                base = node.value
                own = isinstance(base, ast.Name) and base.id in ("self", "cls")
                sup = isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super"
                if id(node) in subclass and (own or sup):
                    if node.attr not in listed:
                        found.append(f"{node.lineno}: .{node.attr} (a GRPOTrainer member the adapter does not list)")
                    continue
                if own:
                    continue  # a private member of one of our own classes that shares a TRL name
                found.append(f"{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.Constant) and node.value in private and len(str(node.value)) > 3:
                found.append(f"{node.lineno}: {node.value!r}")
        if found:
            bad[rel] = found
    assert not bad, f"private TRL/vLLM access outside grpo_ablate/trainer/trl_adapter.py: {bad}"


def _trl_imports(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, module, name) of every `from trl... import name` in a module (function-level ones included)."""
    return [(node.lineno, node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "trl"
            for alias in node.names]


def test_outside_the_adapter_trl_is_imported_only_by_its_exported_names():
    """`from trl.trainer.utils import nanstd` reached a private helper past the adapter's hash and gate: outside
    trainer/trl_adapter.py every name imported from TRL must be one a TRL package exports (its `__all__`)."""
    import importlib

    bad = []
    for path in sorted((ROOT / "grpo_ablate").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "grpo_ablate/trainer/trl_adapter.py":
            continue
        for line, module, name in _trl_imports(ast.parse(path.read_text())):
            exported = getattr(importlib.import_module(module), "__all__", None)
            if exported is None or name not in exported:
                bad.append(f"{rel}:{line}: from {module} import {name}")
    assert not bad, "TRL names imported past trainer/trl_adapter.py that no TRL __all__ exports:\n  " + "\n  ".join(bad)


def test_the_adapters_helpers_are_trls_own_and_refuse_on_an_unchecked_trl(monkeypatch):
    """nanstd is TRL's function itself; pad_token_id reads TRL's tokenizer; both refuse where the hashes do not match."""
    import torch
    from trl import GRPOTrainer
    from trl.trainer.utils import nanstd

    rows = torch.tensor([[1.0, 2.0, float("nan"), 4.0], [0.5, 0.5, 0.5, 0.5]])
    assert torch.equal(trl_adapter.nanstd(rows, dim=1), nanstd(rows, dim=1))
    trainer = object.__new__(GRPOTrainer)
    trainer._tokenizer = type("Tokenizer", (), {"pad_token_id": 7})()
    assert trl_adapter.pad_token_id(trainer) == 7
    try:
        monkeypatch.setattr(trl_adapter, "CHECKED", {})
        trl_adapter.support.cache_clear()
        with pytest.raises(trl_adapter.TrlUnchecked):
            trl_adapter.nanstd(rows, dim=1)
        with pytest.raises(trl_adapter.TrlUnchecked):
            trl_adapter.pad_token_id(trainer)
    finally:
        trl_adapter.support.cache_clear()


def test_an_unchecked_trl_refuses_what_could_mislead_and_degrades_the_rest_loudly(monkeypatch, capsys):
    """The run-time gate: real trainer classes (not built: the gate reads only their type and TRL's source)."""
    from trl import GRPOTrainer

    from grpo_ablate.trainer.scheduled import ScheduledGRPOTrainer

    plain, scheduled = object.__new__(GRPOTrainer), object.__new__(ScheduledGRPOTrainer)
    monkeypatch.setattr(trl_adapter, "_warned", set())
    try:
        monkeypatch.setattr(trl_adapter, "CHECKED", {})
        trl_adapter.support.cache_clear()
        assert not trl_adapter.support().checked
        with pytest.raises(trl_adapter.TrlUnchecked, match=r"not one grpo-ablate was checked against.*G schedules"):
            trl_adapter.gate(scheduled)
        with pytest.raises(trl_adapter.TrlUnchecked, match="vLLM engine"):
            trl_adapter.gate(plain, vllm_evaluation=True)
        trl_adapter.gate(plain)  # a plain GRPOTrainer without vLLM evaluation trains as before
        assert not trl_adapter.time_rollouts(plain, lambda s: None)
        assert not trl_adapter.time_rollouts(plain, lambda s: None)
        err = capsys.readouterr().err
        assert err.count("no generation_seconds") == 1  # once per feature

        version = trl.__version__  # a checked version whose source changed: named by method
        monkeypatch.setattr(trl_adapter, "CHECKED", {version: {m: "0" * 16 for m in HASHED}})
        trl_adapter.support.cache_clear()
        assert trl_adapter.support().changed == tuple(HASHED)
        with pytest.raises(trl_adapter.TrlUnchecked, match="differs from the checked source in _get_train_sampler"):
            trl_adapter.gate(scheduled)
    finally:
        trl_adapter.support.cache_clear()
