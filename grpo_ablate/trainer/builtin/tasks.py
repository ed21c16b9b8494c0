"""The built-in tasks: a problem generator with one right answer per prompt, its dataset, its reward.

"addition" is a carry drill: a 2-digit plus a 1-digit number whose units carry (`47+8=` ->
`55`), checked exactly, reward 1 or 0. A task also says how a learner typically slips, so the
tiny model can be warm-started into a state GRPO can fix (see builtin/model.py). The names and
descriptions are the vocabulary's (`grpo_ablate.core.vocab.BUILTIN_TASKS`); the code is here.

    python -c "from grpo_ablate.trainer.builtin.tasks import task_problems; print(task_problems('addition', 3))"
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from grpo_ablate.core.vocab import BUILTIN_TASKS

from ..text import plain_text

__all__ = [
    "HELD_OUT_SEED",
    "TASKS",
    "Task",
    "WarmStartSettings",
    "get_task",
    "held_out_problems",
    "task_dataset",
    "task_problems",
    "task_reward",
]

# The held-out set is drawn with its own seed, so it is never the training draw.
HELD_OUT_SEED = 987_654


@dataclass(frozen=True)
class WarmStartSettings:
    """The supervised warm start: a learner that knows the format and the sum but slips.

    With probability `noise` a training answer is replaced by the task's typical slip (for
    addition: the carry forgotten), so the model puts most of its mass on the slip and some on
    the right answer. That is the state GRPO is good at fixing: every prompt's right and wrong
    completions differ in the same way, so the policy gradient of all prompts points one way.
    """

    steps: int = 400
    batch_size: int = 256
    learning_rate: float = 3e-3
    warmup_fraction: float = 0.1
    noise: float = 0.8
    seed: int = 0


@dataclass(frozen=True)
class Task:
    """A built-in task: a problem generator with one right answer per prompt, and its score."""

    name: str
    make_problem: Callable[[random.Random], tuple[str, str]]
    score: Callable[[str, str], float]
    max_answer_chars: int
    # A plausible wrong answer for the warm start's label noise.
    corrupt: Callable[[random.Random, str, str], str]
    warm_start: WarmStartSettings = field(default_factory=WarmStartSettings)
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def description(self) -> str:
        return BUILTIN_TASKS[self.name]

    def settings(self) -> dict[str, Any]:
        """Everything that shapes the warm-started model, for the cache key."""
        return {"task": self.name, "params": self.params, "warm_start": asdict(self.warm_start)}


def _addition_problem(digits_a: int, digits_b: int, carry_only: bool = False) -> Callable[[random.Random], tuple[str, str]]:
    def make(rng: random.Random) -> tuple[str, str]:
        while True:
            a, b = rng.randrange(10**digits_a), rng.randrange(10**digits_b)
            if not carry_only or (a % 10) + (b % 10) >= 10:
                break
        # Fixed-width operands: every prompt has the same length, so generation batches need no
        # padding and the digits line up for a 2-layer model.
        return f"{a:0{digits_a}d}+{b:0{digits_b}d}=", str(a + b)

    return make


def _forgot_carry(rng: random.Random, prompt: str, answer: str) -> str:
    """The sum with the units carry dropped: the classic slip of a learner."""
    a, b = (int(x) for x in prompt.rstrip("=").split("+"))
    return str(a + b - 10) if (a % 10) + (b % 10) >= 10 else answer


def _exact_answer(completion: str, answer: str) -> float:
    """1.0 when the completion, up to its end token and surrounding spaces, is the answer."""
    text = completion.split("<eos>", 1)[0].strip()
    return 1.0 if text == answer else 0.0


def _carries(a: int, b: int) -> tuple[bool, bool]:
    """(units carry, tens carry) of a + b."""
    units = (a % 10) + (b % 10) >= 10
    return units, (a // 10 % 10) + (b // 10 % 10) + int(units) >= 10


def _mixed_problem(rng: random.Random) -> tuple[str, str]:
    """A 3-digit plus a 2-digit sum of one of three difficulties, in the same fixed width.

    40% carry-free (easy), 30% one units carry (the carry drill), 30% a double carry (hard):
    real prompt sets mix prompts that are almost always, sometimes and almost never solved.
    """
    kind = rng.random()
    want = (False, False) if kind < 0.4 else (True, False) if kind < 0.7 else (True, True)
    while True:
        a, b = rng.randrange(1000), rng.randrange(100)
        if _carries(a, b) == want:
            return f"{a:03d}+{b:02d}=", str(a + b)


def _mixed_slip(rng: random.Random, prompt: str, answer: str) -> str:
    """Carries dropped: always for a double carry, half the time for a single one."""
    a, b = (int(x) for x in prompt.rstrip("=").split("+"))
    units, tens = _carries(a, b)
    if units and tens:
        return str((a // 100) * 100 + ((a // 10 + b // 10) % 10) * 10 + (a + b) % 10)
    if units and rng.random() < 0.5:
        return str(a + b - 10)
    return answer


# The code for each name in vocab.BUILTIN_TASKS (a test checks that the two agree).
TASKS: dict[str, Task] = {
    "addition": Task(
        name="addition",
        make_problem=_addition_problem(2, 1, carry_only=True),
        score=_exact_answer,
        max_answer_chars=3,
        corrupt=_forgot_carry,
        params={"digits": [2, 1], "carry_only": True, "slip": "forgot_carry"},
    ),
    # The same carry drill from a learner that is almost always wrong (noise 0.96: 1.8% of its
    # answers sampled at temperature 1 are right, measured over 512 prompts), so a group of 2
    # completions is nearly always all wrong (no reward spread). Measured over 40 seeds at 32
    # completions per step and 60 steps (benchmarks/data/sequential_table_rare.json): G=2, 4 and 8
    # tie at 0.468 held-out reward, G=16 scores 0.391 and G=32 0.337, so G matters here, and it is
    # the large groups (two prompts per step or one) that lose.
    "addition_rare": Task(
        name="addition_rare",
        make_problem=_addition_problem(2, 1, carry_only=True),
        score=_exact_answer,
        max_answer_chars=3,
        corrupt=_forgot_carry,
        warm_start=WarmStartSettings(noise=0.96),
        params={"digits": [2, 1], "carry_only": True, "slip": "forgot_carry"},
    ),
    "addition_mixed": Task(
        name="addition_mixed",
        make_problem=_mixed_problem,
        score=_exact_answer,
        max_answer_chars=4,
        corrupt=_mixed_slip,
        params={"digits": [3, 2], "mix": {"no_carry": 0.4, "carry": 0.3, "double_carry": 0.3}, "slip": "dropped_carries"},
    ),
}


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"unknown built-in task {name!r}; choose one of {sorted(TASKS)}") from None


def task_problems(name: str, num_prompts: int, seed: int = 1234) -> list[tuple[str, str]]:
    """`num_prompts` (prompt, answer) pairs, the same for the same seed on every machine."""
    task = get_task(name)
    rng = random.Random(f"{name}:{seed}")
    return [task.make_problem(rng) for _ in range(num_prompts)]


def held_out_problems(name: str, num_prompts: int, exclude: set[str], seed: int = HELD_OUT_SEED) -> list[tuple[str, str]]:
    """Up to `num_prompts` distinct (prompt, answer) pairs whose prompt is not in `exclude` (the training prompts).

    Drawn with a different seed than training, each prompt once; fewer when the task has fewer
    problems outside the training set (the caller says so).
    """
    task = get_task(name)
    rng = random.Random(f"{name}:held-out:{seed}")
    seen = set(exclude)
    out: list[tuple[str, str]] = []
    misses = 0
    while len(out) < num_prompts and misses < 20_000:
        prompt, answer = task.make_problem(rng)
        if prompt in seen:
            misses += 1
            continue
        seen.add(prompt)
        out.append((prompt, answer))
    return out


def task_dataset(name: str, num_prompts: int = 2000, seed: int = 1234) -> Any:
    """A `datasets.Dataset` with `prompt` (plain text) and `answer`; the reward reads `answer`."""
    from datasets import Dataset  # lazy: the tasks import without datasets or torch (tests/test_builtin_registries.py)

    pairs = task_problems(name, num_prompts, seed)
    return Dataset.from_dict({"prompt": [p for p, _ in pairs], "answer": [a for _, a in pairs]})


def task_reward(name: str) -> Callable[..., list[float]]:
    """The task's reward as a TRL reward function: reads the dataset's `answer` column."""
    task = get_task(name)

    def reward(completions: Sequence[Any], answer: Sequence[str] | None = None, **_: Any) -> list[float]:
        if answer is None:
            raise ValueError(
                f"the {name!r} reward needs the dataset's `answer` column; it is only valid with data.task: {name}"
            )
        return [task.score(plain_text(c), str(a)) for c, a in zip(completions, answer, strict=True)]

    reward.__name__ = name
    return reward
