"""Before a trial's first step the console says what it is doing (issue 28: `make demo` showed
`step 0/50 reward - eta ?` for minutes while the built-in model was built or waited for)."""

from __future__ import annotations

import fcntl
import threading

from grpo_ablate.study.console import StudyConsole, Counts
from grpo_ablate.study.lifecycle import Running
from grpo_ablate.trainer.builtin import model


def test_a_trial_waiting_for_the_built_in_model_says_so(tmp_path, monkeypatch):
    """The untrained model (a seeded random one, seconds to build): the run waiting says so, then builds it itself."""
    monkeypatch.setenv("GRPO_ABLATE_CACHE", str(tmp_path / "cache"))
    label, settings, _ = model._settings("builtin:tiny-untrained", "addition")
    target = model.cache_root() / "models" / f"{label}-{model._cache_key(settings)}"
    lock = target.with_suffix(".lock")
    lock.parent.mkdir(parents=True)
    said: list[str] = []
    waiting = threading.Event()

    def log(message: str) -> None:
        said.append(message)
        waiting.set()

    with open(lock, "a+") as held:  # another run is building it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        found: list = []
        worker = threading.Thread(target=lambda: found.append(model.builtin_model_path("builtin:tiny-untrained", "addition",
                                                                                       log=log)))
        worker.start()
        assert waiting.wait(30)
        target.mkdir()
        (target / "config.json").write_text("{}")  # ... and dies, leaving a folder without weights
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    worker.join(120)
    assert found == [target] and model.entry_problem(target) is None
    assert said[0] == f"waiting for the built-in model {label}: another run is building it (once; cached)"
    assert f"the cached built-in model {target} is not whole (model.safetensors is missing)" in said[1], said


def test_the_status_line_shows_what_a_trial_does_before_its_first_step(tmp_path, capsys):
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "log.txt").write_text("noise\n[grpo-ablate] building built-in model tiny-addition in /c (once; cached)\n")
    console = StudyConsole()
    console.status(Counts(), [Running(0, trial, max_steps=50)])
    assert "step 0/50 reward - eta ? (building built-in model tiny-addition in /c (once; cached))" in capsys.readouterr().out
    console.status(Counts(), [Running(0, trial, max_steps=50, step=3, train_seconds=3.0, reward=0.5)])
    assert "building" not in capsys.readouterr().out  # once it trains, the step says enough


def test_the_warm_start_says_how_far_it_is_and_how_long_is_left():
    """Issue 45: a first run built the model silently for over a minute; now it reports by step, with an estimate."""
    from dataclasses import replace

    from grpo_ablate.trainer.builtin.tasks import get_task
    from grpo_ablate.trainer.builtin.tokenizer import MAX_LENGTH, build_tokenizer

    task = get_task("addition")
    task = replace(task, warm_start=replace(task.warm_start, steps=20, batch_size=4))
    tokenizer = build_tokenizer(MAX_LENGTH)
    seen: list[tuple[int, int, float]] = []
    model._warm_start(model.build_tiny_model(tokenizer), tokenizer, task, lambda *a: seen.append(a))
    every = 20 // model.PROGRESS_REPORTS
    assert [s for s, _, _ in seen] == list(range(every, 20, every)) and all(n == 20 for _, n, _ in seen)
    assert all(b[2] >= a[2] >= 0 for a, b in zip(seen, seen[1:]))  # seconds so far, never going back
    assert model.progress_words("tiny-addition", 40, 400, 10.0) == (
        "building built-in model tiny-addition: warm-start step 40/400, about 90 s left (once; cached)")
    assert "estimating" in model.progress_words("tiny-addition", 0, 400, 0.0)
