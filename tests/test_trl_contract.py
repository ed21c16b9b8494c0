"""The private TRL code ScheduledGRPOTrainer relies on is the code it was checked against.

    pytest tests/test_trl_contract.py

`trainer/scheduled.py` overrides four private GRPOTrainer methods and reads three private
attributes. TRL may change any of them in a minor release without a word; a G policy built on
the old behaviour would then train with a wrong grouping or a wrong zero-spread count and
still finish. So the source of each method is hashed, per TRL version, in the table below:
an upgrade of TRL fails here, by name, until someone has re-read the changed methods against
scheduled.py and added the new version's hashes. That makes an upgrade a known event.
"""

from __future__ import annotations

import hashlib
import inspect

import pytest

trl = pytest.importorskip("trl")

# What scheduled.py depends on in each method (the message tells the re-checker where to look).
METHODS = {
    "_get_train_sampler": "returns a RepeatSampler of generation_batch_size / num_generations prompts, each "
                          "repeated num_generations times (ScheduledRepeatSampler copies its order and seed)",
    "_prepare_inputs": "generates every `steps_per_generation * num_iterations` steps, counted by self._step, "
                       "and serves self._buffered_inputs in between (the round boundary _enter_round hooks)",
    "_calculate_rewards": "returns the (completions, reward functions) tensor before weighting, gathered over "
                          "processes (_total_rewards re-weights it with reward_weights)",
    "_generate_and_score_completions": "groups rewards as rewards.view(-1, self.num_generations) for advantages, "
                                       "and appends frac_reward_zero_std to self._metrics[mode]",
}
ATTRIBUTES = ("_step", "_buffered_inputs", "_metrics")

# sha256 (first 16 hex digits) of inspect.getsource(GRPOTrainer.<method>), per supported TRL version.
CHECKED = {
    "1.16.0": {
        "_get_train_sampler": "36497afb4d311dc9",
        "_prepare_inputs": "f824e7fb07147956",
        "_calculate_rewards": "736ae29b083840b5",
        "_generate_and_score_completions": "1fa48922792dcd5c",
    },
}


def _hash(method: object) -> str:
    return hashlib.sha256(inspect.getsource(method).encode()).hexdigest()[:16]


def _installed() -> dict[str, str]:
    from trl import GRPOTrainer

    return {name: _hash(getattr(GRPOTrainer, name)) for name in METHODS}


def test_the_installed_trl_private_methods_are_the_ones_scheduled_py_was_checked_against():
    version = trl.__version__
    installed = _installed()
    checked = CHECKED.get(version)
    if checked is None:
        pytest.fail(
            f"TRL {version} is not in tests/test_trl_contract.py's CHECKED table. ScheduledGRPOTrainer "
            "(grpo_ablate/trainer/scheduled.py) overrides private GRPOTrainer methods; re-read each against what "
            "scheduled.py assumes, run tests/test_schedule_e2e.py and tests/test_g_policy_e2e.py, then add\n"
            f"    {version!r}: {installed!r},\n"
            "to CHECKED. What to re-check:\n" + "\n".join(f"  - {m}: {why}" for m, why in METHODS.items()),
            pytrace=False)
    changed = [m for m in METHODS if installed[m] != checked[m]]
    if changed:
        pytest.fail(
            f"TRL {version}'s GRPOTrainer source differs from the hashes recorded for it in CHECKED: "
            + ", ".join(changed) + ". scheduled.py relies on:\n"
            + "\n".join(f"  - {m}: {METHODS[m]}" for m in changed)
            + f"\nRe-check them, then record the new hashes {({m: installed[m] for m in changed})!r}.", pytrace=False)


def test_the_private_attributes_scheduled_py_reads_are_set_and_used_where_it_expects():
    from trl import GRPOTrainer

    init = inspect.getsource(GRPOTrainer.__init__)
    missing = [a for a in ATTRIBUTES if f"self.{a} =" not in init]
    assert not missing, (f"TRL {trl.__version__}'s GRPOTrainer.__init__ no longer sets {missing}; "
                         "ScheduledGRPOTrainer (trainer/scheduled.py) reads them: re-check _prepare_inputs and _per_prompt_round")
    prepare = inspect.getsource(GRPOTrainer._prepare_inputs)
    assert "self._step" in prepare and "self._buffered_inputs" in prepare, (
        "GRPOTrainer._prepare_inputs no longer counts self._step or buffers self._buffered_inputs; "
        "ScheduledGRPOTrainer._prepare_inputs decides when a round starts from them")
    score = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "frac_reward_zero_std" in score and "self._metrics" in score, (
        "GRPOTrainer._generate_and_score_completions no longer logs frac_reward_zero_std in self._metrics; "
        "ScheduledGRPOTrainer._per_prompt_round overwrites that entry")


def test_the_table_names_exactly_the_methods_scheduled_py_overrides():
    """A new override in scheduled.py must join the contract (and a removed one leave it)."""
    from trl import GRPOTrainer

    from grpo_ablate.trainer.scheduled import ScheduledGRPOTrainer

    private_overrides = {name for name, value in vars(ScheduledGRPOTrainer).items()
                         if name.startswith("_") and not name.startswith("__") and callable(value) and hasattr(GRPOTrainer, name)}
    assert private_overrides == set(METHODS), (
        f"ScheduledGRPOTrainer overrides private GRPOTrainer methods {sorted(private_overrides)}, the contract table "
        f"lists {sorted(METHODS)}: add the new ones to METHODS and CHECKED")
    for version, hashes in CHECKED.items():
        assert set(hashes) == set(METHODS), version
