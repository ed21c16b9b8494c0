"""The per-round G policies' pure core: labels, feasibility, allocation, grouping, joining batches.

    HF_HUB_OFFLINE=1 python -m pytest -q tests/test_g_policy.py
"""

from __future__ import annotations

import itertools
import pickle
import random

import pytest
import torch

from grpo_ablate.core.space import BatchShape, check_pair
from grpo_ablate.trainer.g_policy import (PromptPosterior, allocate, expected_informative, group_advantages,
                                          merge_rows, zero_spread_groups)
from grpo_ablate.core.schedule import parse_generations
from grpo_ablate.core.vocab import Arm, Cell, Dynamic, PerPrompt, Schedule, generations_text


# ---------------------------------------------------------------- labels


@pytest.mark.parametrize("text, cls, label", [
    ("dynamic:8", Dynamic, "dynamic:8"),
    ("dynamic:8[2]", Dynamic, "dynamic:8"),  # the default cap is not written
    ("dynamic:16[0]", Dynamic, "dynamic:16[0]"),
    ("adaptive:8[2-16]", PerPrompt, "adaptive:8[2-16]"),
    (" adaptive:4[4-4] ", PerPrompt, "adaptive:4[4-4]"),
])
def test_labels_round_trip_everywhere(text, cls, label):
    g = parse_generations(text)
    assert type(g) is cls and g.label == label and str(g) == label
    assert parse_generations(generations_text(g)) == g and hash(parse_generations(label)) == hash(g)
    assert pickle.loads(pickle.dumps(g)) == g
    arm = Arm(g, 32, 1.0)
    assert Arm.from_mapping(arm.as_dict()) == arm
    assert "/" not in Cell(arm, 0).slug and ":" not in Cell(arm, 0).slug
    assert isinstance(g, Schedule) and g != int(g)  # never equal to the fixed G it averages


def test_policies_differ_from_each_other_and_sort_after_their_fixed_g():
    d, a = parse_generations("dynamic:8"), parse_generations("adaptive:8[2-16]")
    assert d != a and d != parse_generations("dynamic:8[3]")
    assert sorted([a, 8, d, 4]) == [4, 8, a, d]


@pytest.mark.parametrize("text, words", [
    ("dynamic:1", "G >= 2"),
    ("adaptive:8[1-16]", "2 <= g_min"),
    ("adaptive:8[10-16]", "g_min <= mean G"),
    ("adaptive:8[2-4]", "mean G <= g_max"),
    ("adaptive:8", "adaptive:8[2-16]"),
    ("dynamic:x", "dynamic:8"),
])
def test_bad_labels_say_what_to_write(text, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_generations(text)


def test_feasibility_of_the_new_values():
    one = BatchShape(world_size=1, per_device_train_batch_size=32)
    two = BatchShape(world_size=2, per_device_train_batch_size=8)  # batch 16, 8 per process
    assert check_pair(one, parse_generations("dynamic:8")) is None
    assert check_pair(one, parse_generations("adaptive:8[2-16]")) is None
    assert "not divisible by num_generations 3" in check_pair(one, parse_generations("adaptive:3[2-4]"))
    assert check_pair(two, parse_generations("adaptive:16[2-16]")) is None  # groups may span processes
    reason = check_pair(two, parse_generations("dynamic:16"))
    assert reason.startswith("dynamic:16:") and "whole groups of 16" and "multiple of 32" in reason


# ---------------------------------------------------------------- allocation


def _brute(beliefs, total, low, high):
    best = None
    for g in itertools.product(range(low, high + 1), repeat=len(beliefs)):
        if sum(g) == total:
            v = sum(expected_informative(a, b, k) for (a, b), k in zip(beliefs, g))
            best = v if best is None else max(best, v)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_greedy_allocation_is_optimal(seed):
    rng = random.Random(seed)
    n = rng.randint(2, 4)
    low, high = rng.choice([(2, 8), (2, 6), (3, 9)])
    total = rng.randint(n * low, n * high)
    beliefs = [(rng.uniform(0.1, 20), rng.uniform(0.1, 20)) for _ in range(n)]
    g = allocate(beliefs, total, low, high)
    assert sum(g) == total and all(low <= x <= high for x in g)
    got = sum(expected_informative(a, b, k) for (a, b), k in zip(beliefs, g))
    assert got == pytest.approx(_brute(beliefs, total, low, high), abs=1e-9)


def test_allocation_spends_where_a_mixed_group_is_still_unlikely_but_possible():
    """A prompt known to be always solved gets g_min (more samples cannot help); a middle prompt
    is mixed at a small G already, so the extra completions go to the lopsided one (p ~ 0.1)."""
    solved, middle, lopsided = (1e6, 1.0), (50.0, 50.0), (10.0, 90.0)
    g = allocate([solved, middle, lopsided], 24, 2, 16)
    assert g[0] == 2 and g[2] > g[1] > 2
    assert allocate([middle] * 4, 32, 2, 16) == [8, 8, 8, 8]  # no information: fixed G
    assert allocate([solved, middle], 16, 8, 8) == [8, 8]
    with pytest.raises(ValueError, match="cannot share"):
        allocate([middle] * 2, 40, 2, 16)


def test_expected_informative_matches_a_point_pass_rate():
    # a very concentrated Beta is a known p: 1 - p^g - (1-p)^g
    p, g = 0.3, 6
    assert expected_informative(p * 1e7, (1 - p) * 1e7, g) == pytest.approx(1 - p ** g - (1 - p) ** g, rel=1e-5)


def test_posterior_learns_each_prompt_and_the_running_rate():
    post = PromptPosterior()
    assert post.mean("a") == pytest.approx(0.5)
    post.observe("a", [1, 1, 1, 0])
    assert post.mean("a") > 0.6 and post.mean("b") == pytest.approx(post.mean("never seen"))
    post.observe("b", [0, 0, 0, 0, float("nan")])
    assert post.belief("b")[1] > post.belief("a")[1]
    fixed = PromptPosterior(prior=(1.0, 9.0))
    assert fixed.mean("x") == pytest.approx(0.1)


# ---------------------------------------------------------------- grouping


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_unequal_groups_use_the_same_formula_as_equal_ones(scale):
    """The per-group loop (any sizes) against TRL's vectorised arithmetic (equal sizes)."""
    torch.manual_seed(0)
    rewards = torch.randint(0, 2, (24,)).float()
    rewards[5] = float("nan")  # an unscorable completion
    fast, zf = group_advantages(rewards, [4] * 6, scale)
    chunks = [group_advantages(rewards[i:i + 4], [4], scale) for i in range(0, 24, 4)]
    if scale != "batch":  # batch scale divides by the whole batch's std, not each group's
        assert torch.allclose(fast, torch.cat([c[0] for c in chunks]), atol=1e-6)
    sizes = [3, 5, 2, 6, 8]
    adv, zero = group_advantages(rewards, sizes, scale)
    at = 0
    for g in sizes:
        r = rewards[at:at + g]
        expect = (r - torch.nanmean(r))
        if scale == "group":
            expect = expect / (r[~r.isnan()].std() + 1e-4)
        if scale != "batch":
            assert torch.allclose(adv[at:at + g], torch.nan_to_num(expect, nan=0.0), atol=1e-5)
        at += g


def test_zero_spread_groups():
    r = torch.tensor([1.0, 1, 1, 0, 1, 0, 0, 0, 0.5, 0.5])
    assert zero_spread_groups(r, [3, 2, 3, 2]) == [True, False, True, True]


def test_merge_rows_pads_prompts_left_and_completions_right():
    a = {"prompt_ids": torch.tensor([[5, 6], [7, 8]]), "prompt_mask": torch.ones(2, 2, dtype=torch.long),
         "completion_ids": torch.tensor([[1, 2, 3], [4, 5, 6]]), "completion_mask": torch.ones(2, 3, dtype=torch.long),
         "advantages": torch.tensor([0.5, -0.5]), "num_items_in_batch": torch.tensor(6)}
    b = {"prompt_ids": torch.tensor([[9, 9, 9]]), "prompt_mask": torch.ones(1, 3, dtype=torch.long),
         "completion_ids": torch.tensor([[1]]), "completion_mask": torch.ones(1, 1, dtype=torch.long),
         "advantages": torch.tensor([1.0]), "num_items_in_batch": torch.tensor(1)}
    out = merge_rows([(a, [1]), (b, [0])], pad_token_id=0)
    assert out["prompt_ids"].tolist() == [[0, 7, 8], [9, 9, 9]]
    assert out["prompt_mask"].tolist() == [[0, 1, 1], [1, 1, 1]]
    assert out["completion_ids"].tolist() == [[4, 5, 6], [1, 0, 0]]
    assert out["completion_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert out["advantages"].tolist() == [-0.5, 1.0] and "num_items_in_batch" not in out
    with pytest.raises(ValueError, match="pixel_values"):
        merge_rows([({**a, "pixel_values": torch.zeros(2)}, [0])], pad_token_id=0)


def test_g_alloc_points_read_rows_and_the_reports_json_text():
    from grpo_ablate.report.g_alloc import g_alloc_points

    assert g_alloc_points([[0.25, 6], [0.9, 2]]) == [(0.25, 6), (0.9, 2)]
    assert g_alloc_points("[[0.5, 8]]") == [(0.5, 8)]
    assert g_alloc_points(None) == [] and g_alloc_points("not json") == [] and g_alloc_points([[1, 2, 3]]) == []


def test_plan_explains_each_policy_and_checks_the_batch(tmp_path):
    from grpo_ablate import StudyError, load_study
    from grpo_ablate.commands.plan_words import plan_json, plan_text

    sets = [f"study.output_dir={tmp_path}", 'search.num_generations=[2, 8, "dynamic:8[1]", "adaptive:8[2-16]"]']
    study = load_study("studies/tiny-cpu.yaml", sets)
    text = plan_text(study)
    assert "adaptive:8[2-16]: per-prompt G: batch / 8 prompts per round, each given 2 to 16" in text
    assert "dynamic:8[1]: G=8 with dynamic sampling" in text and "at most 1 extra round(s)" in text
    assert set(plan_json(study)["g_policies"]) == {"dynamic:8[1]", "adaptive:8[2-16]"}
    with pytest.raises(StudyError, match="dynamic:64"):  # 64 does not divide the batch of 32
        load_study("studies/tiny-cpu.yaml", [*sets[:1], 'search.num_generations=[8, "dynamic:64"]'])


def test_fitted_prior_is_advise_jsons_fit_at_the_nearest_temperature():
    from grpo_ablate.files.advise_file import fitted_prior

    fits = {"fits": {"0.7": {"a": 1.5, "b": 3.0, "mean": 0.333}, "1.0": {"a": 2.0, "b": 8.0, "mean": 0.2}}}
    assert fitted_prior(fits, 0.9) == (2.0, 8.0) and fitted_prior(fits, 0.6) == (1.5, 3.0)
    assert fitted_prior(None, 1.0) is None  # no advise.json: the running pass rate
    assert fitted_prior({"fits": {"1.0": {"a": None, "b": 8.0}}}, 1.0) is None  # no usable fit


def test_the_parent_resolves_an_adaptive_arms_prior_into_its_spec(tmp_path):
    """The child never looks for advise.json (it used to walk up from its trial folder): build_spec reads it with
    the study's owner and writes the fit into the spec, which carries it through spec.json."""
    from grpo_ablate.config import StudyError, load_study
    from grpo_ablate.files.advise_file import save_advice
    from grpo_ablate.files.owned import Owner
    from grpo_ablate.study.trial_spec import build_spec
    from grpo_ablate.contract.spec import TrialSpec

    study = load_study("studies/tiny-cpu.yaml", [f"study.output_dir={tmp_path}",
                                                 'search.num_generations=[8, "adaptive:8[2-16]"]'])
    adaptive, fixed = parse_generations("adaptive:8[2-16]"), 8

    def prior(g, t=0.9):
        return build_spec(study, Cell(Arm(g, 32, t), 0, "baseline"), tmp_path / "trials" / "00000", timeout=60).advise_prior

    assert prior(adaptive) is None  # no advise.json yet: the policy starts from the running pass rate
    save_advice(tmp_path, {"fits": {"0.7": {"a": 1.5, "b": 3.0}, "1.0": {"a": 2.0, "b": 8.0}}}, Owner.of(study))
    assert prior(adaptive) == (2.0, 8.0) and prior(adaptive, 0.6) == (1.5, 3.0)
    assert prior(fixed) is None  # only a per-prompt G reads a prior
    spec = build_spec(study, Cell(Arm(adaptive, 32, 0.9), 0, "baseline"), tmp_path / "trials" / "00001", timeout=60)
    assert TrialSpec.from_json(spec.to_json()).advise_prior == (2.0, 8.0)
    with pytest.raises(ValueError, match="advise_prior"):
        TrialSpec(trial_dir=str(tmp_path), advise_prior=(0.0, 1.0))
    save_advice(tmp_path / "other", {"fits": {}}, Owner(study="another", model="m", hardware="h"))
    (tmp_path / "advise.json").write_text((tmp_path / "other" / "advise.json").read_text())
    with pytest.raises(StudyError, match="advise"):  # another study's file is refused, not silently ignored
        prior(adaptive)
    assert prior(fixed) is None  # an arm that reads no prior never reads the file
