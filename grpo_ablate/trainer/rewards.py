"""Reward functions by name: the built-ins, the built-in tasks' own rewards, and any `package.module:function`.

A study names its rewards (`rewards: [{name: accuracy}, {name: format, weight: 0.5}]`); this
module turns each name into a TRL reward function `f(prompts, completions, completion_ids,
**kwargs) -> list[float | None]`. Every function is wrapped so a broken reward fails its trial
with the reward's name in the reason (an exception inside it, or the wrong number of values),
instead of a bare traceback from deep inside GRPOTrainer.

The names and their descriptions are the vocabulary's (`grpo_ablate.core.vocab.BUILTIN_REWARDS`, and
every `BUILTIN_TASKS` name scores its task); `REWARD_FACTORIES` holds the code for exactly
those names. `accuracy`, `format` and `tag_count` are written here and score as Open R1's
rewards of those names do (tests/test_openr1_rewards.py checks them on Open R1's layouts);
`accuracy` needs `pip install 'grpo-ablate[math]'`. A recipe that names Open R1's rewards uses
Open R1's own functions where `open_r1` is importable (config/recipes/rewards.py), else Open R1's accuracy
rule of the recipe's date (trainer/open_r1_rewards.py, re-exported here under the names recipes record).

    python -c "from grpo_ablate.trainer.rewards import describe; print(describe())"

groups.jsonl comes through TRL's public reward interface too (`record_groups`): TRL calls each
reward function with the round's prompts and completions, so each study reward also notes its
scores, and one more reward function, `GroupsRecorder`, is given weight 0 in GRPOConfig's
`reward_weights` and returns None for every completion. TRL weights and sums the rewards with
`nansum` (and marks a completion no reward scored by "every reward is NaN"), so a reward that is
NaN everywhere adds nothing and changes no advantage: the loss is the one without it
(tests/test_groups_recorder.py trains one step both ways). TRL calls it only for its own rounds,
never for the held-out evaluation, which scores with the study's functions alone.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import re
import struct
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from grpo_ablate.core.bounds import BOUNDS
from grpo_ablate.contract.spec import RewardEntry
from grpo_ablate.trl_facts.fields import trl_default
from grpo_ablate.core.vocab import BUILTIN_REWARDS, BUILTIN_TASKS

from .builtin.tasks import TASKS, task_reward
from .collective import all_gather
# the names recipes resolve to (config/recipes/registry.py) and stored studies record: `trainer.rewards:<name>`
from .open_r1_rewards import open_r1_accuracy_reward, open_r1_accuracy_reward_early
from .text import plain_text

__all__ = [
    "REWARD_FACTORIES",
    "RewardContext",
    "RewardFunctionError",
    "build_reward",
    "build_rewards",
    "describe",
    "open_r1_accuracy_reward",
    "open_r1_accuracy_reward_early",
    "GROUPS_RECORDER",
    "GenerationRound",
    "GroupsRecorder",
    "record_groups",
]

RewardFunc = Callable[..., Any]  # a list of rewards, or (an async reward) a coroutine that gives one


class RewardFunctionError(RuntimeError):
    """A reward function misbehaved; the message starts with the reward's name."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"reward function '{name}' {message}")
        self.reward_name = name


@dataclass(frozen=True)
class RewardContext:
    """What a reward factory may need from the study: the task, the completion budget."""

    task: str | None = None
    max_completion_length: int | None = None


# --------------------------------------------------------------------------------------------
# Built-in rewards
# --------------------------------------------------------------------------------------------

# Open R1's layout (open_r1/rewards.py format_reward): each tag on its own line, nothing before
# <think> or after </answer>. re.match with DOTALL and MULTILINE, as there, so `$` also matches
# before a trailing newline and `.*?` crosses lines.
_FORMAT = re.compile(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", re.DOTALL | re.MULTILINE)
# tag_count's four pieces, newlines included, each worth 0.25 when it occurs exactly once (Open R1's rule)
_TAG_PIECES = ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def format_reward(completions: Sequence[Any], **_: Any) -> list[float]:
    """1.0 when the completion is laid out as Open R1's format reward requires, else 0.0."""
    return [1.0 if _FORMAT.match(plain_text(c)) else 0.0 for c in completions]


def tag_count_reward(completions: Sequence[Any], **_: Any) -> list[float]:
    """0.25 for each of Open R1's four tag pieces that occurs exactly once."""
    out = []
    for c in completions:
        text = plain_text(c)
        out.append(sum(0.25 for piece in _TAG_PIECES if text.count(piece) == 1))
    return out


def _math_verify():
    try:
        from latex2sympy2_extended import NormalizationConfig  # optional: the `math` extra
        from math_verify import LatexExtractionConfig, parse, verify
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "the 'accuracy' reward needs math-verify. Install it with: pip install 'grpo-ablate[math]'"
        ) from exc
    # How Open R1 reads a completion: LaTeX only (no bare numbers), \\boxed{} first, over the whole text.
    answer_config = [LatexExtractionConfig(
        normalization_config=NormalizationConfig(nits=False, malformed_operators=False, basic_latex=True,
                                                 boxed="all", units=True),
        boxed_match_priority=0, try_extract_without_anchor=False)]
    return parse, verify, LatexExtractionConfig, answer_config


def accuracy_reward(completions: Sequence[Any], solution: Sequence[Any] | None = None, **kwargs: Any) -> list[float]:
    """1.0 when math-verify finds the completion's answer equal to the gold one, else 0.0.

    Where the gold answer is LaTeX (Open R1's datasets), this scores as Open R1's accuracy reward:
    the gold parsed with LaTeX extraction, the completion's first LaTeX answer (\\boxed{} first)
    found anywhere in the whole completion, not inside <answer> tags only. Where the gold is not
    LaTeX at all (no `$`, no backslash: a plain `answer` column such as "42"), Open R1 scores every completion 1.0 to skip the
    example; here the gold is read as $42$ and the completion's LaTeX answer, else its <answer>
    tag's text, is compared with it, so such datasets still teach something. A gold answer that
    cannot be parsed either way scores 1.0 for every completion, as Open R1's does (the group has
    no spread, so it trains nothing).
    """
    gold_column = solution if solution is not None else kwargs.get("answer")
    if gold_column is None:
        raise ValueError("needs a `solution` or `answer` column in the dataset to check answers against")
    parse, verify, LatexExtractionConfig, answer_config = _math_verify()
    latex_gold = [LatexExtractionConfig()]
    out: list[float] = []
    for completion, gold in zip(completions, gold_column, strict=True):
        gold_text = str(gold)
        text = plain_text(completion)
        try:
            gold_parsed = parse(gold_text, extraction_mode="first_match", extraction_config=latex_gold)
            plain_gold = not gold_parsed and "$" not in gold_text and "\\" not in gold_text  # not LaTeX at all
            if plain_gold:
                gold_parsed = parse(f"${gold_text.strip()}$", extraction_mode="first_match", extraction_config=latex_gold)
            if not gold_parsed:
                out.append(1.0)
                continue
            predicted = parse(text, extraction_config=answer_config, extraction_mode="first_match")
            if not predicted and plain_gold:
                tagged = _ANSWER.search(text)
                predicted = parse(tagged.group(1) if tagged else text)
            out.append(1.0 if predicted and verify(gold_parsed, predicted) else 0.0)
        except Exception:  # math-verify raises on pathological strings: a wrong answer, not a crash
            out.append(0.0)
    return out


def _length_penalty(ctx: RewardContext) -> RewardFunc:
    limit = ctx.max_completion_length or trl_default("max_completion_length")

    def length_penalty(completions: Sequence[Any], completion_ids: Sequence[Sequence[int]] | None = None, **_: Any) -> list[float]:
        if completion_ids is not None:
            lengths = [len(ids) for ids in completion_ids]
        else:
            lengths = [len(plain_text(c)) for c in completions]
        return [-min(1.0, n / limit) for n in lengths]

    return length_penalty


def _task_reward(ctx: RewardContext) -> RewardFunc:
    if not ctx.task:
        raise ValueError("the 'task' reward needs a built-in task (data.task); this study uses a dataset")
    return task_reward(ctx.task)


# The code for each name in vocab.BUILTIN_REWARDS (a test checks that the two agree). Task names
# are rewards too: build_reward takes them from the task registry.
REWARD_FACTORIES: dict[str, Callable[[RewardContext], RewardFunc]] = {
    "accuracy": lambda ctx: accuracy_reward,
    "format": lambda ctx: format_reward,
    "tag_count": lambda ctx: tag_count_reward,
    "length_penalty": _length_penalty,
    "task": _task_reward,
}


def describe() -> str:
    lines = [f"{name:16s} {doc}" for name, doc in BUILTIN_REWARDS.items()]
    lines += [f"{name:16s} built-in task reward: {doc}" for name, doc in BUILTIN_TASKS.items()]
    lines.append("module:function  any importable function f(prompts, completions, completion_ids, **kwargs)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Resolution and the safety wrapper
# --------------------------------------------------------------------------------------------


def _import_function(spec: str) -> RewardFunc:
    """`package.module:function`, or `/folder/package.module:function` for a module in that folder.

    The folder form is what a study's reward module beside the study file becomes when the study
    loads (config/load.py), so the trial imports it from there whatever its current directory.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"reward {spec!r}: expected a built-in name or 'package.module:function'")
    folder, _, dotted = module_name.rpartition("/")
    if folder:
        module_name = dotted
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"reward {spec!r}: cannot import module {module_name!r} ({exc})") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ValueError(f"reward {spec!r}: module {module_name!r} has no attribute {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"reward {spec!r}: {attr!r} is not callable")
    return target


def _with_args(func: Any, args: dict[str, Any] | None, spec: str) -> RewardFunc:
    """The reward `rewards[].args` make of `func`: a factory called with them, or a reward with them bound.

    A factory is told apart by its signature: a reward takes `completions`, a factory does not.
    Open R1 builds its parametrised rewards both ways (get_code_format_reward(language=...);
    partial(cf_code_reward, test_batch_size=...)), and a recipe names them by the registry's key.
    """
    if not args:
        return func
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        params = {}
    if "completions" in params:
        return functools.update_wrapper(functools.partial(func, **args), func)
    made = func(**args)
    if not callable(made):
        raise ValueError(f"reward {spec!r}: called with {args} it returned {type(made).__name__}, not a reward function")
    return made


def _reward_name(spec: str) -> str:
    """The name TRL logs under `rewards/<name>/mean`: the built-in name or the function's name."""
    return spec.partition(":")[2].split(".")[-1] if ":" in spec else spec


def _is_async(func: Any) -> bool:
    """Whether calling `func` gives a coroutine (functions, partials, instances with an async __call__)."""
    target = func.func if isinstance(func, functools.partial) else func
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(getattr(target, "__call__", None))  # noqa: B004 - the method itself


def _validated(values: Any, n: int, name: str) -> list[float | None]:
    """One float or None per completion, or a RewardFunctionError naming the reward and the rule."""
    try:
        values = list(values)
    except TypeError:
        raise RewardFunctionError(
            name, f"returned {type(values).__name__}, expected a list of one float per completion"
        ) from None
    if len(values) != n:
        raise RewardFunctionError(
            name,
            f"returned {len(values)} values for {n} completions; it must return exactly one float (or None) per completion",
        )
    out: list[float | None] = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        if isinstance(v, (bool, str, bytes)) or not hasattr(v, "__float__"):
            raise RewardFunctionError(name, f"returned {type(v).__name__} at position {i}; expected float or None")
        f = float(v)
        if math.isnan(f):
            out.append(None)  # TRL reads NaN as None: no score from this reward
            continue
        if (problem := BOUNDS["reward"].problem(f)) is not None:  # inf, or so large the group's mean overflows
            raise RewardFunctionError(name, f"returned {f} at position {i}; a reward {problem} (None for no score)")
        out.append(f)
    return out


class _Abstentions:
    """Which completions of a batch no reward has scored, across the study's reward functions.

    TRL takes None (or NaN) as "no score from this reward". A completion no reward scores is
    silently worth 0, and when that is every completion of a batch the logged reward is NaN, so
    the trial later fails with nothing to say why. Each wrapper reports here; once every reward
    has scored the batch (TRL passes them the same `completions` list), a batch nobody scored
    fails the trial naming the rewards and what they returned.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self._open: dict[int, tuple[set[str], set[int], dict[str, str]]] = {}
        self._lock = threading.Lock()

    def record(self, batch: Sequence[Any], name: str, raw: list[Any], scored: list[float | None]) -> None:
        with self._lock:
            seen, unscored, returned = self._open.setdefault(id(batch), (set(), set(range(len(scored))), {}))
            seen.add(name)
            unscored.difference_update(i for i, v in enumerate(scored) if v is not None)
            kinds = sorted({repr(v) if v is None else str(float(v)) for v, f in zip(raw, scored) if f is None})
            if kinds:
                returned[name] = " or ".join(kinds)
            if len(seen) < len(self.names):
                return
            del self._open[id(batch)]
        if scored and len(unscored) == len(scored):
            first, *others = self.names
            also = "".join(f", and '{o}' returned {returned.get(o, '?')}" for o in others)
            raise RewardFunctionError(first, (
                f"returned {returned.get(first, '?')} for all {len(scored)} completions of a batch{also}: no completion "
                "got a score, so the logged reward is NaN; return a finite float per completion (None only where "
                "another reward scores it)"))


def _reraise(exc: Exception, name: str) -> None:
    # Running out of memory is the hardware's verdict on the trial (outcome oom), not a bug in the reward.
    if isinstance(exc, (RewardFunctionError, MemoryError)) or type(exc).__name__ == "OutOfMemoryError":
        raise exc
    raise RewardFunctionError(name, f"raised {type(exc).__name__}: {exc}") from exc


def _checked(func: RewardFunc, name: str, abstentions: _Abstentions | None = None) -> RewardFunc:
    """Wrap a reward so misbehaviour fails the trial with the reward's name and the rule broken.

    An async reward stays async (TRL runs those concurrently), so the wrapper matches its kind.
    `abstentions` is shared by the study's rewards; alone, a reward is its own judge.
    """
    tally = abstentions or _Abstentions([name])

    def checked(values: Any, completions: Sequence[Any]) -> list[Any]:
        try:
            raw = list(values)
        except TypeError:
            raw = values  # not a sequence: _validated names the mistake
        out = _validated(raw, len(completions), name)
        tally.record(completions, name, raw, out)
        return out
    if _is_async(func):

        async def async_reward(prompts: Sequence[Any], completions: Sequence[Any], *args: Any, **kwargs: Any) -> list[Any]:
            try:
                values = await func(*args, prompts=prompts, completions=completions, **kwargs)
            except Exception as exc:
                _reraise(exc, name)
            return checked(values, completions)

        wrapper: RewardFunc = async_reward
    else:

        def reward(prompts: Sequence[Any], completions: Sequence[Any], *args: Any, **kwargs: Any) -> list[Any]:
            try:
                values = func(*args, prompts=prompts, completions=completions, **kwargs)
            except Exception as exc:
                _reraise(exc, name)
            return checked(values, completions)

        wrapper = reward
    wrapper.__name__ = name
    wrapper.__qualname__ = name
    wrapper.__doc__ = getattr(func, "__doc__", None)
    return wrapper


def build_reward(spec: str, ctx: RewardContext, abstentions: _Abstentions | None = None,
                 args: dict[str, Any] | None = None) -> tuple[str, RewardFunc]:
    """(logged name, checked reward function) for one `rewards[].name` (and its `args`, for an imported one)."""
    if spec in REWARD_FACTORIES:
        func = REWARD_FACTORIES[spec](ctx)
        name = ctx.task if spec == "task" and ctx.task else spec
    elif spec in TASKS:
        func = _task_reward(RewardContext(task=spec, max_completion_length=ctx.max_completion_length))
        name = spec
    elif ":" in spec:
        func = _with_args(_import_function(spec), args, spec)
        named = getattr(func, "__name__", None) if args else None
        name = named if isinstance(named, str) and named.isidentifier() else _reward_name(spec)
    else:
        known = sorted([*REWARD_FACTORIES, *TASKS])
        raise ValueError(f"unknown reward {spec!r}; use one of {known} or 'package.module:function'")
    return name, _checked(func, name, abstentions)


def build_rewards(
    entries: Sequence[RewardEntry], ctx: RewardContext
) -> tuple[list[RewardFunc], list[str], list[float]]:
    """Reward functions, their logged names and weights; no entries means the task's own reward."""
    if not entries:
        if not ctx.task:
            raise ValueError("no rewards given and no built-in task to take one from: set `rewards:` in the study")
        entries = [RewardEntry("task")]
    funcs, names, weights = [], [], []
    abstentions = _Abstentions([])
    for entry in entries:
        name, func = build_reward(entry.name, ctx, abstentions, entry.args)
        abstentions.names.append(name)
        if name in names:
            raise ValueError(f"reward {name!r} is listed twice; TRL logs rewards by name, so names must be unique")
        funcs.append(func)
        names.append(name)
        weights.append(float(entry.weight))
    return funcs, names, weights


# --------------------------------------------------------------------------------------------
# groups.jsonl: the round's completions and scores, through the reward interface
# --------------------------------------------------------------------------------------------

GROUPS_RECORDER = "grpo_ablate_groups"  # the zero-weight recorder's name (TRL logs rewards/<name>/mean, std)
_UNCLAIMED = 16  # batches scored outside a TRL round (none today) kept before the oldest is forgotten


def _as_logged(value: float | None) -> float | None:
    """A score as TRL holds it: float32 (its rewards tensor), so the recorded totals are the ones it trained on."""
    return None if value is None else struct.unpack("f", struct.pack("f", value))[0]


@dataclass(frozen=True)
class GenerationRound:
    """TRL's last generation batch over every process, in TRL's order: one entry per completion."""

    prompts: list[Any]
    completions: list[Any]
    rewards: dict[str, list[float | None]]  # reward name -> its unweighted score per completion (None: no score)


@dataclass
class _Batch:
    """One process's share of one reward call: TRL passes every reward function the same lists."""

    completions: list[Any]
    prompts: list[Any] = field(default_factory=list)
    scores: dict[str, list[float | None]] = field(default_factory=dict)
    claimed: bool = False  # the recorder saw it: TRL scored it as a round


class GroupsRecorder:
    """A reward function of weight 0 that keeps TRL's rounds for groups.jsonl (the module docstring says why
    it changes nothing). `latest()` is what TRL's own log of the generation batch would hold: the last
    `keep` (generation_batch_size) completions, gathered over processes in rank order."""

    def __init__(self, names: Sequence[str], keep: int) -> None:
        self.__name__ = GROUPS_RECORDER  # TRL names a reward function by its __name__
        self.names = list(names)
        self.keep = int(keep)
        self._batches: dict[int, _Batch] = {}  # id(completions) -> its batch; the batch holds the list, so ids stay unique
        self._rounds: deque[_Batch] = deque()
        self._lock = threading.Lock()

    def _batch(self, completions: Sequence[Any]) -> _Batch:
        batch = self._batches.get(id(completions))
        if batch is None:
            batch = self._batches[id(completions)] = _Batch(completions)  # type: ignore[arg-type]
            unclaimed = [k for k, b in self._batches.items() if not b.claimed]
            for k in unclaimed[:-_UNCLAIMED]:
                del self._batches[k]
        return batch

    def note(self, completions: Sequence[Any], name: str, scores: Sequence[float | None]) -> None:
        """A study reward's scores of a batch (an async reward notes after the recorder's call: same batch)."""
        with self._lock:
            self._batch(completions).scores[name] = [_as_logged(v) for v in scores]

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **_: Any) -> list[None]:
        with self._lock:
            batch = self._batch(completions)
            batch.prompts, batch.claimed = list(prompts), True
            self._rounds.append(batch)
            while sum(len(b.completions) for b in list(self._rounds)[1:]) >= self.keep:
                del self._batches[id(self._rounds.popleft().completions)]
        return [None] * len(completions)

    def latest(self) -> GenerationRound | None:
        """The last generation batch over every process; None before the first. A collective in a
        multi-process trial: every rank calls it at the same log (MetricsRecorder.on_log)."""
        with self._lock:
            mine = [(b.prompts, list(b.completions), {n: b.scores.get(n) for n in self.names}) for b in self._rounds]
        ranks = all_gather(mine)
        prompts: list[Any] = []
        completions: list[Any] = []
        rewards: dict[str, list[float | None]] = {n: [] for n in self.names}
        for i in range(min(len(r) for r in ranks)):
            for rank in ranks:
                p, c, scored = rank[i]
                prompts += p
                completions += c
                for n in self.names:
                    rewards[n] += scored[n] if scored[n] is not None and len(scored[n]) == len(c) else [None] * len(c)
        if not completions:
            return None
        cut = max(0, len(completions) - self.keep)  # TRL's log is a deque of generation_batch_size entries
        return GenerationRound(prompts[cut:], completions[cut:], {n: v[cut:] for n, v in rewards.items()})


def _noting(func: RewardFunc, name: str, recorder: GroupsRecorder) -> RewardFunc:
    """`func` as TRL calls it, also handing its scores to the recorder; same name, same kind (sync or async)."""
    if _is_async(func):

        async def async_noted(prompts: Sequence[Any], completions: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
            out = await func(*args, prompts=prompts, completions=completions, **kwargs)
            recorder.note(completions, name, out)
            return out

        wrapper: RewardFunc = async_noted
    else:

        def noted(prompts: Sequence[Any], completions: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
            out = func(*args, prompts=prompts, completions=completions, **kwargs)
            recorder.note(completions, name, out)
            return out

        wrapper = noted
    wrapper.__name__ = wrapper.__qualname__ = name
    return wrapper


def record_groups(funcs: Sequence[RewardFunc], names: Sequence[str], weights: Sequence[float],
                  generation_batch_size: int) -> tuple[list[RewardFunc], list[float], GroupsRecorder]:
    """(reward functions for GRPOTrainer, their `reward_weights` for GRPOConfig, the recorder).

    The study's functions (build_rewards' checked ones) come first, each noting its scores, then the
    recorder with weight 0. The weights are the study's, unchanged, plus that 0."""
    if GROUPS_RECORDER in names:
        raise ValueError(f"a reward may not be named {GROUPS_RECORDER!r}: grpo-ablate's groups recorder has that name")
    recorder = GroupsRecorder(names, generation_batch_size)
    return ([*(_noting(f, n, recorder) for f, n in zip(funcs, names)), recorder], [*map(float, weights), 0.0],
            recorder)
