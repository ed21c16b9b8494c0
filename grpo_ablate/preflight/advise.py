"""`grpo-ablate advise STUDY`: predict which G pays off, from samples of the starting model only.

Samples K completions for N training prompts at each candidate temperature (trainer/sample.py,
its own process), fits the prompts' difficulty (difficulty.py), and predicts for every feasible
(G, temperature, generation batch) the share of zero-spread groups and the informative groups
per optimizer step; with probe.json also per hour and per million generated tokens. Writes
advise.json and advise.png next to probe.json.

    grpo-ablate advise studies/tiny-cpu.yaml [--k 16] [--prompts 64] [--seed 0] [--enqueue]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from grpo_ablate.preflight.difficulty import fit_beta_binomial, is_binary, zero_spread_empirical
from grpo_ablate.preflight.screen_rule import signal_per_step
from grpo_ablate.core.schedule import prompts_per_round
from grpo_ablate.stats.zero_spread import zero_spread, zero_spread_beta
from grpo_ablate.records import trial_record as record
from grpo_ablate.files.advise_file import ADVISE_COMPLETIONS, NO_SPREAD_FRACTION, save_advice
from grpo_ablate.files.owned import Owner
from grpo_ablate.files.probe_file import load_probe
from grpo_ablate.contract.metrics import summarize_file
from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX, METRICS_FILE, SAMPLES_FILE, Schedule
from grpo_ablate.core.children import die_with_parent, importing_this_checkout
from grpo_ablate.config import Problem, StudyError
from grpo_ablate.storage.store import is_rdb_url, open_storage
from grpo_ablate.launch.devices import cpu_slot
from grpo_ablate.contract.env import PROGRESS_PREFIX

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from optuna.trial import FrozenTrial

    from grpo_ablate.config import StudyConfig

__all__ = ["Advice", "Measured", "Prediction", "advise_figure", "advise_text", "measured_points", "plot_advice", "predict",
           "run_advise", "sample", "will_not_help", "write_completions"]

ADVISE_PLOT = "advise.png"


@dataclass
class Prediction:
    num_generations: int
    generation_batch_size: int
    temperature: float
    zero_spread: float
    mean_p_zero_spread: float | None
    informative_groups_per_step: float
    informative_groups_per_hour: float | None = None
    informative_groups_per_million_tokens: float | None = None
    reason: str = ""


@dataclass
class Advice:
    study: str
    k: int
    num_prompts: int
    seed: int
    temperatures: list[float]
    binary: bool
    fits: dict[str, dict[str, float]] = field(default_factory=dict)  # temperature -> {a, b, mean}
    predictions: list[Prediction] = field(default_factory=list)
    shortlist: list[Prediction] = field(default_factory=list)
    always_solved: list[str] = field(default_factory=list)
    never_solved: list[str] = field(default_factory=list)
    mean_completion_tokens: float = 0.0
    seconds: float = 0.0
    ranked_by: str = ""
    # "G will not help here: ..." when every feasible G leaves nearly all groups without spread
    # (then the shortlist is empty); "" when G can matter
    answer: str = ""
    completions_file: str | None = None  # the sampled completions with their rewards (ADVISE_COMPLETIONS)
    left_out_by_probe: int = 0  # feasible (G, batch) pairs probe.json says do not fit, or are not G's largest fit

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _bad(path: str, message: str) -> Exception:

    return StudyError([Problem(path=path, message=message)])


def _candidate_temperatures(study: "StudyConfig") -> list[float]:
    t = study.temperatures()
    if t is None:
        return [study.fixed_temperature()]
    if isinstance(t, list):
        return sorted(float(x) for x in t)
    return [round(t.low, 4), round((t.low + t.high) / 2, 4), round(t.high, 4)]


def sample(study: "StudyConfig", *, k: int, num_prompts: int, temperatures: list[float], seed: int, folder: Path,
           log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run trainer/sample.py in its own process; its samples.json. Its progress lines go to `log`."""

    folder.mkdir(parents=True, exist_ok=True)
    spec = {"model": study.model.model_dump(), "data": study.data.model_dump(), "rewards": [r.model_dump() for r in study.rewards],
            "trainer": dict(study.trainer), "hardware": study.hardware.model_dump(), "num_prompts": num_prompts, "k": k,
            "temperatures": temperatures, "seed": seed}
    (folder / "sample_spec.json").write_text(json.dumps(spec, indent=2, default=str))
    (folder / SAMPLES_FILE).unlink(missing_ok=True)
    env = importing_this_checkout(dict(os.environ))
    if study.model.name_or_path.startswith(BUILTIN_MODEL_PREFIX):
        env["HF_HUB_OFFLINE"] = "1"
    log_path = folder / "log.txt"
    with cpu_slot() as threads, log_path.open("wb") as out, log_path.open("rb") as tail:  # a host CPU slot, as a trial
        proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate.trainer.sample", os.fspath(folder / "sample_spec.json")],
                                stdout=out, stderr=subprocess.STDOUT, env={**env, **threads}, preexec_fn=die_with_parent())
        pending = b""
        try:
            while True:
                done = proc.poll() is not None  # read after the last poll: no line is left unread at exit
                *lines, pending = (pending + tail.read()).split(b"\n")  # a half-written line waits for its end
                for line in lines:
                    text = line.decode(errors="replace")
                    if log is not None and text.startswith(PROGRESS_PREFIX):
                        log(text)
                if done:
                    break
                time.sleep(0.5)
        except BaseException:  # Ctrl-C: the sampler goes with us
            proc.kill()
            proc.wait(timeout=30)  # after SIGKILL: ends at once unless the kernel holds it
            raise
    if proc.returncode != 0:
        last = log_path.read_text(errors="replace").strip().splitlines()[-1:]
        raise RuntimeError(f"sampling failed (exit {proc.returncode}; log {log_path}): {' '.join(last)}")
    return json.loads((folder / SAMPLES_FILE).read_text())


def predict(study: "StudyConfig", samples: dict[str, Any], *, seed: int = 0, shortlist_size: int = 3,
            completions_file: str | None = None) -> Advice:
    """Fit the difficulty per temperature and predict every feasible (G, temperature, batch).

    When no G can help (`will_not_help`), the answer says so and the shortlist stays empty.
    """
    temps = [float(t) for t in samples["temperatures"]]
    k = int(samples["k"])
    rewards: list[list[list[float]]] = samples["rewards"]
    binary = all(is_binary(r) for r in rewards)
    n_completions = max(1, len(samples["prompts"]) * k * len(temps))
    mean_tokens = float(samples.get("completion_tokens") or 0) / n_completions
    advice = Advice(study=study.study.name, k=k, num_prompts=len(samples["prompts"]), seed=seed, temperatures=temps,
                    binary=binary, mean_completion_tokens=round(mean_tokens, 3), seconds=float(samples.get("seconds") or 0),
                    completions_file=completions_file)
    probe = load_probe(study.output_dir, Owner.of(study))
    best = probe.best() if probe else {}
    zero: dict[tuple[float, int], tuple[float, float | None]] = {}
    gens = sorted({p.num_generations for p in study.space.feasible})
    for t, per_prompt in zip(temps, rewards):
        if binary:
            successes = [int(round(sum(row))) for row in per_prompt]
            fit = fit_beta_binomial(successes, k)
            advice.fits[str(t)] = {"a": round(fit.a, 4), "b": round(fit.b, 4), "mean": round(fit.mean, 4)}
            for g in gens:
                zero[(t, g)] = (zero_spread_beta(g, fit.a, fit.b), zero_spread(g, fit.mean))
        else:
            for g in gens:
                zero[(t, g)] = (zero_spread_empirical(g, per_prompt), None)
    for pair in study.space.feasible:
        g, b = pair.num_generations, pair.generation_batch_size
        for t in temps:
            z, zbar = zero[(t, g)]
            per_step = signal_per_step(b, int(g), z, pair.steps_per_generation)  # at z's G (a schedule's final one)
            pred = Prediction(g, b, t, round(z, 4), None if zbar is None else round(zbar, 4), round(per_step, 4))
            point = probe.point(g, b) if probe else None
            if point is not None and point.fits and point.seconds_per_step:
                pred.informative_groups_per_hour = round(per_step * 3600 / point.seconds_per_step, 1)
            if mean_tokens > 0:
                pred.informative_groups_per_million_tokens = round((1 - z) / g / mean_tokens * 1e6, 1)
            if probe is not None and (point is None or not point.fits) and g in best:
                advice.left_out_by_probe += 1
                continue  # the probe says this batch does not fit (or is not G's largest fit)
            pred.reason = (f"{z:.0%} of groups of {g} are predicted to have zero spread at temperature {t:g}, "
                           f"so {per_step:.2f} of {prompts_per_round(b, int(g))} groups per step teach")
            if pred.informative_groups_per_hour is not None:
                pred.reason += f"; {pred.informative_groups_per_hour:.0f} informative groups/hour at the probe's pace"
            advice.predictions.append(pred)
    key = "informative_groups_per_hour" if any(p.informative_groups_per_hour for p in advice.predictions) else (
        "informative_groups_per_million_tokens" if mean_tokens > 0 else "informative_groups_per_step")
    advice.ranked_by = key
    ranked = sorted(advice.predictions, key=lambda p: (-(getattr(p, key) or 0.0), p.num_generations, p.temperature,
                                                       p.generation_batch_size))
    advice.shortlist = ranked[:shortlist_size]
    _solved(advice, samples)
    advice.answer = will_not_help(advice)
    if advice.answer:
        advice.shortlist = []
    return advice


def will_not_help(advice: Advice) -> str:
    """"G will not help here: ..." when even the best feasible (G, temperature) is predicted to leave
    NO_SPREAD_FRACTION or more of its groups without reward spread; "" otherwise.

    No G can rank configurations whose groups teach nothing: the prompts, the budget, the model or
    the reward must change first, and the sampled completions show which.
    """
    if not advice.predictions:
        return ""
    best = min(advice.predictions, key=lambda p: (p.zero_spread, -p.num_generations))
    if best.zero_spread < NO_SPREAD_FRACTION:
        return ""
    temps = ", ".join(f"{t:g}" for t in advice.temperatures)
    solved = (f"{len(advice.never_solved)} of {advice.num_prompts} prompts were never solved and "
              f"{len(advice.always_solved)} always solved in K={advice.k} samples")
    where = f" in {advice.completions_file}" if advice.completions_file else ""
    return (f"G will not help here: at temperature {temps}, every feasible G is predicted to leave at least "
            f"{NO_SPREAD_FRACTION:.0%} of its groups without reward spread (the fewest: {best.zero_spread:.0%} at "
            f"G={best.num_generations}, T={best.temperature:g}), so almost no prompt would give a gradient. {solved}. "
            f"Easier prompts, a longer budget or a stronger starting model would help; check the reward function on "
            f"the sampled completions and their rewards{where} before running trials.")


def write_completions(output_dir: Path, samples: dict[str, Any]) -> Path | None:
    """ADVISE_COMPLETIONS: per prompt and temperature, its K completions with their rewards (atomic)."""
    texts = samples.get("completions")
    if not isinstance(texts, list):
        return None
    path = output_dir / ADVISE_COMPLETIONS
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w") as f:
        for t, per_prompt, rewards in zip(samples["temperatures"], texts, samples["rewards"]):
            for prompt, comps, scores in zip(samples["prompts"], per_prompt, rewards):
                f.write(json.dumps({"temperature": t, "prompt": prompt,
                                    "completions": [{"text": c, "reward": r} for c, r in zip(comps, scores)]}) + "\n")
    os.replace(tmp, path)
    return path


def _solved(advice: Advice, samples: dict[str, Any]) -> None:
    """Prompts whose K samples all agree at every temperature: no G gives them a gradient."""
    rewards = samples["rewards"]
    for i, prompt in enumerate(samples["prompts"]):
        rows = [r[i] for r in rewards]
        top = max(max(row) for row in rows)
        if all(min(row) == max(row) for row in rows):
            if advice.binary:
                (advice.always_solved if top >= 1.0 else advice.never_solved).append(prompt)
            else:
                advice.never_solved.append(prompt)


class Measured(NamedTuple):
    """One finished trial's measured zero-spread share, the dot drawn over the prediction."""

    num_generations: int
    temperature: float
    zero_spread: float


def measured_points(trials: "list[FrozenTrial]") -> list[Measured]:
    """The completed trials' (G, temperature, frac_reward_zero_std), as the runner records them.

    The trial's arm and folder come from its record (trial_record.arm_of, trial_dir);
    frac_reward_zero_std is a diagnostic, not a trial attr, so it is computed from the trial's
    metrics.jsonl, as the report does. A G schedule has no single G: left out.
    """
    out = []
    for t in trials:
        folder = record.trial_dir(t)
        arm = record.arm_of(t)
        if not record.is_result(t) or record.is_copy(t) or not folder or arm is None:
            continue
        z = summarize_file(Path(folder) / METRICS_FILE)["frac_reward_zero_std"]
        if z is not None and not isinstance(arm.num_generations, Schedule):
            out.append(Measured(int(arm.num_generations), arm.temperature, float(z)))
    return out


def _measured(study: "StudyConfig") -> list[Measured]:
    """The measured points of this study's earlier trials; none before the study exists."""
    import optuna  # lazy: Optuna only when earlier trials are read; every command imports advise.py


    url = study.storage_url
    if not is_rdb_url(url) and not Path(url.removeprefix("journal:")).is_file():
        return []  # opening would create the journal
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        ostudy = optuna.load_study(study_name=study.study.name, storage=open_storage(url))
    except (KeyError, StudyError):  # no such study in the storage yet, or the storage cannot be opened
        return []
    return measured_points(ostudy.get_trials(deepcopy=False))


def advise_figure(advice: Advice, measured: list[Measured] | None = None) -> "Figure":
    """Predicted zero-spread share against G per temperature; the mean-p curve dashed; measured dots."""
    from matplotlib.figure import Figure  # lazy: matplotlib only when the figure is drawn

    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for t in advice.temperatures:
        rows = sorted({(p.num_generations, p.zero_spread, p.mean_p_zero_spread) for p in advice.predictions if p.temperature == t})
        if not rows:
            continue
        (line,) = ax.plot([r[0] for r in rows], [r[1] for r in rows], marker="o", label=f"predicted, T={t:g}")
        if rows[0][2] is not None:
            ax.plot([r[0] for r in rows], [r[2] for r in rows], ls="--", color=line.get_color(), alpha=0.6,
                    label=f"mean-p curve, T={t:g}")
        pts = [m for m in (measured or []) if abs(m.temperature - t) < 1e-6]
        if pts:
            ax.scatter([m.num_generations for m in pts], [m.zero_spread for m in pts], marker="x", color=line.get_color(),
                       label=f"measured, T={t:g}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("num_generations (G)")
    ax.set_ylabel("share of zero-spread groups")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_advice(advice: Advice, path: Path, measured: list[Measured] | None = None) -> Path:
    """advise.png: `advise_figure` saved (a bare Figure: no pyplot state, no backend to choose)."""
    advise_figure(advice, measured).savefig(path, dpi=110)
    return path


def run_advise(study: "StudyConfig", *, k: int = 16, num_prompts: int = 64, seed: int = 0,
               temperatures: list[float] | None = None, log: Callable[[str], None] | None = None) -> Advice:
    """Check the input, sample, predict; write advise.json and advise.png. Bad input: StudyError."""
    if k < 2:
        raise _bad("--k", f"K >= 2 samples per prompt are needed to see a spread, got {k}")
    if num_prompts < 1:
        raise _bad("--prompts", f"an empty prompt set predicts nothing: give --prompts >= 1, got {num_prompts}")
    if not any(p.num_generations >= 2 for p in study.space.feasible):
        raise _bad("search.num_generations", "no feasible num_generations (G >= 2) to advise on; see `grpo-ablate plan`")
    temps = temperatures or _candidate_temperatures(study)
    started = time.perf_counter()
    folder = study.output_dir / "advise"
    if log is not None:
        log(f"advise: sampling {num_prompts} prompts x K={k} at temperature(s) {temps} (log: {folder / 'log.txt'})")
    samples = sample(study, k=k, num_prompts=num_prompts, temperatures=temps, seed=seed, folder=folder, log=log)
    if not samples["prompts"]:
        raise _bad("data", "the study's prompt set is empty: nothing to sample")
    study.output_dir.mkdir(parents=True, exist_ok=True)
    written = write_completions(study.output_dir, samples)
    advice = predict(study, samples, seed=seed, completions_file=str(written) if written else None)
    advice.seconds = round(time.perf_counter() - started, 2)
    save_advice(study.output_dir, advice.to_dict(), Owner.of(study))
    plot_advice(advice, study.output_dir / ADVISE_PLOT, _measured(study))
    return advice


# Above this concentration (a + b) the fitted prompts are all about equally hard: the numbers carry no more.
_EQUAL_DIFFICULTY = 1000.0


def beta_words(a: float, b: float, mean: float) -> str:
    """The per-prompt success fit in words a reader can use: a and b to 3 significant figures, and what a
    huge a + b means (every prompt about as hard as the mean), instead of Beta(a=1692218.67, ...)."""
    text = f"per-prompt success ~ Beta(a={a:.3g}, b={b:.3g}), mean p {mean:.2f}"
    if a + b > _EQUAL_DIFFICULTY:
        text += (f"; a + b = {a + b:.2g}: the prompts are all about equally hard (success near {mean:.2f} for every "
                 f"prompt), so G changes the zero-spread share only through that one rate")
    return text


def empty_shortlist_reason(advice: Advice) -> str:
    """Why no configuration is on the shortlist, when none is."""
    if advice.left_out_by_probe and not advice.predictions:
        return (f"shortlist: empty: all {advice.left_out_by_probe} feasible (G, batch) pair(s) were left out because "
                f"the study's probe.json (an earlier `grpo-ablate probe`) says they do not fit or are not that G's "
                f"largest fitting batch; the study's settings no longer match that probe: rerun `grpo-ablate probe`, "
                f"or delete probe.json")
    if not advice.predictions:
        return "shortlist: empty: the study has no feasible (G, batch) pair at these temperatures (see `grpo-ablate plan`)"
    return "shortlist: empty"


def advise_text(advice: Advice) -> str:
    lines = [f"advise: {advice.num_prompts} prompts x K={advice.k} at temperature(s) {advice.temperatures} "
             f"in {advice.seconds:.1f} s ({'binary' if advice.binary else 'non-binary'} reward)"]
    for t, fit in advice.fits.items():
        lines.append(f"  T={t}: {beta_words(fit['a'], fit['b'], fit['mean'])}")
    if advice.answer:
        lines.append(advice.answer)
    elif not advice.shortlist:
        lines.append(empty_shortlist_reason(advice))
    else:
        lines.append(f"shortlist (ranked by {advice.ranked_by}):")
        for i, p in enumerate(advice.shortlist, 1):
            lines.append(f"  {i}. G={p.num_generations} batch={p.generation_batch_size} T={p.temperature:g}: {p.reason}")
    lines.append("zero-spread: predicted share of groups with no reward spread; zero@mean-p: that share if every prompt "
                 "had the mean success rate (lower: prompts differ in difficulty); inf/...: informative groups")
    lines.append(f"{'G':>4} {'batch':>6} {'T':>5} {'zero-spread':>11} {'zero@mean-p':>11} {'inf/step':>8} {'inf/hour':>9} {'inf/Mtok':>9}")
    for p in advice.predictions:
        def f(v: float | None, spec: str) -> str:
            return "-" if v is None else format(v, spec)

        lines.append(f"{p.num_generations:>4} {p.generation_batch_size:>6} {p.temperature:>5g} {p.zero_spread:>11.3f} "
                     f"{f(p.mean_p_zero_spread, '.3f'):>11} {p.informative_groups_per_step:>8.2f} "
                     f"{f(p.informative_groups_per_hour, '.0f'):>9} {f(p.informative_groups_per_million_tokens, '.0f'):>9}")
    lines.append(f"always solved at every temperature ({len(advice.always_solved)}): {advice.always_solved[:10]}")
    lines.append(f"never solved at every temperature ({len(advice.never_solved)}): {advice.never_solved[:10]}")
    if advice.completions_file:
        lines.append(f"sampled completions with their rewards: {advice.completions_file}")
    return "\n".join(lines)
