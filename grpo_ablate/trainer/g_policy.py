"""How many completions each prompt gets in a generation round: the one decision behind schedules,
dynamic sampling and per-prompt G (trainer/scheduled.py applies it inside TRL's GRPOTrainer).

    python -c "from grpo_ablate.trainer.g_policy import allocate; print(allocate([(1,1),(5,5),(1,9)], 24, 2, 16))"

Three policies, one mechanism (`policy_for`):
- a fixed G or a schedule (`4→8@40%`): every prompt of a round gets the round's G; the sampler
  draws the round with that G (`ScheduleState`), nothing changes after drawing;
- dynamic sampling (`dynamic:8`): every prompt gets G; after scoring, groups whose rewards
  have zero spread are dropped and fresh prompts generated until the batch is full again;
- per-prompt G (`adaptive:8[2-16]`): the sampler draws batch/8 prompts; before generating,
  the round's completions are re-divided among them (`allocate`), same total.

The per-prompt objective: a group of g completions of a prompt whose pass rate is p teaches
something unless all pass or all fail, with probability f(g) = 1 - p^g - (1-p)^g. With p
unknown, drawn from the prompt's Beta(a, b) posterior, E[f(g)] = 1 - E[p^g] - E[(1-p)^g] and
E[p^g] = prod_{k<g} (a+k)/(a+b+k). The marginal gain E[f(g+1)] - E[f(g)] =
E[p^g (1-p)] + E[(1-p)^g p] is a mixture of sequences that shrink with g, so each E[f] is
concave in g; the sum over prompts is separable, and the only coupling is the fixed total with
box bounds. For a separable concave objective under one sum constraint, giving each next unit
to the largest marginal gain (from every prompt at g_min) is optimal (the greedy algorithm of
resource allocation, Gross 1956; Ibaraki & Katoh 1988, ch. 4): an exchange argument moves any
other allocation to the greedy one without lowering the sum. tests/test_g_policy.py checks it
against brute force.

Pure (torch only for the advantage arithmetic); no trainer state here.
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from grpo_ablate.stats.zero_spread import zero_spread_beta

from .trl_adapter import nanstd

__all__ = ["PromptPosterior", "allocate", "expected_informative", "group_advantages", "zero_spread_groups",
           "merge_rows", "prompt_key"]

PRIOR_STRENGTH = 2.0  # pseudo-observations of the running-pass-rate prior (weak: a prompt's own groups soon dominate)


def expected_informative(a: float, b: float, g: int) -> float:
    """P(a group of g is not all-equal) for a prompt with pass rate ~ Beta(a, b): 1 - the zero-spread law."""
    return 1.0 - zero_spread_beta(g, a, b)


def allocate(beliefs: Sequence[tuple[float, float]], total: int, low: int, high: int) -> list[int]:
    """g_i in [low, high], summing to `total`, maximising sum E[1 - p_i^g_i - (1-p_i)^g_i] (greedy; see above).

    Ties go to the prompt with fewer completions so far, then the earlier prompt: with no
    information every prompt gets the same g, as fixed G would give.
    """
    n = len(beliefs)
    if not n * low <= total <= n * high:
        raise ValueError(f"{n} prompts cannot share {total} completions with {low} to {high} each")
    g = [low] * n
    values = [expected_informative(a, b, low) for a, b in beliefs]

    def entry(i: int) -> tuple[float, int, int]:
        a, b = beliefs[i]
        gain = expected_informative(a, b, g[i] + 1) - values[i]
        return (-round(gain, 12), g[i], i)

    heap = [entry(i) for i in range(n) if g[i] < high]
    heapq.heapify(heap)
    for _ in range(total - n * low):
        _, _, i = heapq.heappop(heap)
        g[i] += 1
        a, b = beliefs[i]
        values[i] = expected_informative(a, b, g[i])
        if g[i] < high:
            heapq.heappush(heap, entry(i))
    return g


def prompt_key(prompt: Any) -> str:
    """A prompt's identity across rounds (a string, or a conversation as JSON)."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


@dataclass
class PromptPosterior:
    """Per-prompt Beta posteriors of the pass rate, from each prompt's own groups.

    A reward counts as a pass fraction clipped to [0, 1] (exact for 0/1 rewards). A prompt not
    seen yet starts from `prior` (advise.json's fitted Beta when given: the spec's advise_prior) or else from the running
    pass rate of everything seen so far, worth PRIOR_STRENGTH observations.
    """

    prior: tuple[float, float] | None = None
    seen: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (passes, fails)
    passes: float = 0.0
    total: float = 0.0

    def belief(self, key: str) -> tuple[float, float]:
        if self.prior is not None:
            a0, b0 = self.prior
        else:
            m = (self.passes + 1.0) / (self.total + 2.0)  # running pass rate (Laplace: 0.5 before any data)
            a0, b0 = PRIOR_STRENGTH * m, PRIOR_STRENGTH * (1.0 - m)
        s, f = self.seen.get(key, (0.0, 0.0))
        return a0 + s, b0 + f

    def mean(self, key: str) -> float:
        a, b = self.belief(key)
        return a / (a + b)

    def observe(self, key: str, rewards: Sequence[float]) -> None:
        r = [min(1.0, max(0.0, float(x))) for x in rewards if x is not None and not math.isnan(float(x))]
        if not r:
            return
        s, f = self.seen.get(key, (0.0, 0.0))
        self.seen[key] = (s + sum(r), f + len(r) - sum(r))
        self.passes += sum(r)
        self.total += len(r)


def group_advantages(rewards: Any, sizes: Sequence[int], scale: str) -> tuple[Any, Any]:
    """(advantages, per-completion zero-spread flags) with each group normalised at its own size.

    TRL's formula (sum_then_normalize): (r - group mean) / (std + 1e-4), std of the group
    ("group"), of the whole batch ("batch") or only for the zero-spread flag ("none"). When every
    group has the same size this is TRL's own vectorised arithmetic, so a policy that gives every
    prompt G reproduces fixed G to the bit.
    """
    import torch  # lazy: only the per-prompt path needs torch; the policies import without it

    if sum(sizes) != rewards.numel():
        raise ValueError(f"group sizes sum to {sum(sizes)}, rewards have {rewards.numel()}")
    if len(set(sizes)) == 1:
        g = sizes[0]
        mean = torch.nanmean(rewards.view(-1, g), dim=1).repeat_interleave(g, dim=0)
        std = nanstd(rewards.view(-1, g), dim=1).repeat_interleave(g, dim=0) if g > 1 else torch.zeros_like(rewards)
    else:
        means, stds, at = [], [], 0
        for g in sizes:
            chunk = rewards[at:at + g]
            means.append(torch.nanmean(chunk).expand(g))
            stds.append(nanstd(chunk).expand(g) if g > 1 else torch.zeros(g, dtype=rewards.dtype, device=rewards.device))
            at += g
        mean, std = torch.cat(means), torch.cat(stds)
    zero = torch.isclose(std, torch.zeros_like(std))
    if scale == "batch":
        std = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    advantages = rewards - mean
    if scale != "none":
        advantages = advantages / (std + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0), zero


def zero_spread_groups(rewards: Any, sizes: Sequence[int]) -> list[bool]:
    """Per group: did every completion get the same reward (TRL's isclose(std, 0) test)?"""
    _, zero = group_advantages(rewards, sizes, "none")
    out, at = [], 0
    for g in sizes:
        out.append(bool(zero[at]))
        at += g
    return out


# ---------------------------------------------------------------- joining scored batches

_LEFT_PADDED = {"prompt_ids", "prompt_mask"}
_ROW_KEYS = {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "old_per_token_logps",
             "sampling_per_token_logps", "ref_per_token_logps", "importance_sampling_ratio", "tool_mask"}


def merge_rows(pieces: Sequence[tuple[dict[str, Any], Sequence[int]]], *, pad_token_id: int) -> dict[str, Any]:
    """One scored batch from chosen rows of several (TRL `_generate_and_score_completions` outputs).

    Prompts are left-padded and completions right-padded, as TRL pads them, to the longest
    piece. `num_items_in_batch` is left to the caller (it counts every process's tokens).
    """
    import torch  # lazy: only the per-prompt path needs torch; the policies import without it

    keys = set(pieces[0][0])
    unknown = keys - _ROW_KEYS - {"num_items_in_batch"}
    if unknown:
        raise ValueError(f"dynamic sampling cannot join batches carrying {sorted(unknown)} (multimodal or tool inputs)")
    out: dict[str, Any] = {}
    for key in sorted(keys - {"num_items_in_batch"}):
        parts = [batch[key][list(rows)] for batch, rows in pieces if len(rows)]
        if parts[0].ndim == 2:
            width = max(p.shape[1] for p in parts)
            fill = pad_token_id if key in ("prompt_ids", "completion_ids") else 0
            padded = []
            for p in parts:
                extra = width - p.shape[1]
                if extra:
                    pad = torch.full((p.shape[0], extra), fill, dtype=p.dtype, device=p.device)
                    p = torch.cat([pad, p] if key in _LEFT_PADDED else [p, pad], dim=1)
                padded.append(p)
            parts = padded
        out[key] = torch.cat(parts, dim=0)
    return out

