"""The built-in model: a 2-layer, 64-wide Qwen2 (~135k parameters), warm-started and cached on disk.

A randomly initialised model never answers a task correctly, so GRPO would see only
zero-spread groups and learn nothing. `builtin:tiny` is therefore warm-started (supervised,
once) on answers that carry the task's typical slip most of the time: a learner that knows how
to add but forgets the carry. GRPO's verified reward then has one clear, learnable job.

The model and its tokenizer are saved under `$GRPO_ABLATE_CACHE` (default
`~/.cache/grpo-ablate`), in a folder named by a hash of every setting that shapes it and of the
torch/transformers versions. It is written to a temporary folder and renamed into place under a
file lock, so parallel trials build it once and never see half a model (a rank of a distributed
trial builds it in a child process: transformers saves weights only from rank 0). Because it lives on
disk, `beta > 0` works: TRL reloads the reference model from the policy's path.

    python -m grpo_ablate.trainer.builtin.model addition   # build (or find) the cached model, print accuracy
    python -m grpo_ablate.trainer.builtin.model addition --model builtin:tiny-vllm   # the vLLM tier's

torch and transformers are imported inside the functions that build or score a model: finding a
cached one (every trial after the first) needs neither. fcntl is imported where the lock is taken
because it does not exist on Windows, where the atomic rename alone keeps readers safe.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from grpo_ablate.vocab import BUILTIN_MODEL_PREFIX

from .tasks import TASKS, Task, get_task
from .tokenizer import DATASET_MAX_LENGTH, MAX_LENGTH, SPECIAL_TOKENS, VOCAB_CHARS, build_tokenizer

__all__ = [
    "FOLDER_FORMAT",
    "SHAPES",
    "WARM_STARTED",
    "TinyModelSettings",
    "build_tiny_model",
    "builtin_model_path",
    "cache_root",
    "progress_words",
    "PROGRESS_REPORTS",
    "is_builtin_model",
    "portable_tokenizer_config",
    "task_accuracy",
]

# The code for each name in vocab.BUILTIN_MODELS (a test checks that the two agree): whether
# the model is warm-started on the study's built-in task.
WARM_STARTED: dict[str, bool] = {
    "builtin:tiny": True,
    "builtin:tiny-untrained": False,
    "builtin:tiny-vllm": True,
}


@dataclass(frozen=True)
class TinyModelSettings:
    """The tiny Qwen2's shape. Changing any field changes the cache key."""

    hidden_size: int = 64
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    max_position_embeddings: int = MAX_LENGTH
    init_seed: int = 0


# Where a name's shape differs from TinyModelSettings' defaults. `builtin:tiny-vllm` has 2 heads of
# 32 instead of 4 of 16: vLLM's CPU attention refuses head sizes under 32, and the same parameter
# count keeps it as quick to warm-start and train as `builtin:tiny`, on the same task.
SHAPES: dict[str, dict[str, int]] = {
    "builtin:tiny-vllm": {"num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 1664},
}


def is_builtin_model(name_or_path: str) -> bool:
    return name_or_path.startswith(BUILTIN_MODEL_PREFIX)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Seed torch's global generator for a block, then restore it (the trainer seeds its own)."""
    import torch

    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def build_tiny_model(tokenizer: Any, settings: TinyModelSettings = TinyModelSettings()) -> Any:
    """A randomly initialised tiny Qwen2, seeded so every build is identical."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        num_key_value_heads=settings.num_key_value_heads,
        max_position_embeddings=settings.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    with _seeded(settings.init_seed):
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model.to(torch.float32)


# The folder's layout, part of the cache key: 2 writes tokenizer_config.json for older transformers too
# (portable_tokenizer_config), so a command trial's script on transformers 4.52 loads the cached model; 3 splits
# every character into its own piece, newlines included (tokenizer.py). The weights of a task model are the same.
FOLDER_FORMAT = 3
TOKENIZER_CLASS = "PreTrainedTokenizerFast"


def portable_tokenizer_config(folder: Path) -> None:
    """Name the tokenizer class every transformers release has: transformers 5 writes `TokenizersBackend`,
    which 4.52's AutoTokenizer refuses ("does not exist or is not currently imported"); the class the
    tokenizer is (PreTrainedTokenizerFast over tokenizer.json) loads the same tokenizer in both."""
    path = Path(folder) / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = TOKENIZER_CLASS
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


PROGRESS_REPORTS = 10  # the warm start says where it is this many times (by step, so a test sees every one)


def progress_words(label: str, step: int, steps: int, elapsed: float) -> str:
    """'building built-in model tiny-addition: warm-start step 40/400, about 90 s left (once; cached)'.

    The estimate is the elapsed time per step so far times the steps left; the run's status line
    shows this line (study.console reads a trial's last "[grpo-ablate]" line before its first step).
    """
    left = elapsed / step * (steps - step) if step else None
    eta = f"about {left:.0f} s left" if left is not None else "estimating the time left"
    return f"building built-in model {label}: warm-start step {step}/{steps}, {eta} (once; cached)"


def _warm_start(model: Any, tokenizer: Any, task: Task,
                progress: Callable[[int, int, float], None] = lambda step, steps, elapsed: None) -> dict[str, float]:
    """Supervised steps on the task's (prompt, answer) pairs, loss on the answer only; `progress`
    (step, steps, seconds so far) is called PROGRESS_REPORTS times along the way."""
    import torch

    ws = task.warm_start
    rng = random.Random(f"warm:{task.name}:{ws.seed}")
    eos = tokenizer.eos_token_id
    optimizer = torch.optim.AdamW(model.parameters(), lr=ws.learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=ws.learning_rate, total_steps=ws.steps, pct_start=ws.warmup_fraction
    )
    # Character-level vocabulary: encode by lookup instead of calling the tokenizer 200k times.
    vocab = tokenizer.get_vocab()
    unk = tokenizer.unk_token_id

    def encode(text: str) -> list[int]:
        return [vocab.get(ch, unk) for ch in text]

    model.train()
    loss_value = float("nan")
    every = max(1, ws.steps // PROGRESS_REPORTS)
    started = time.perf_counter()
    with _seeded(ws.seed):
        for step in range(1, ws.steps + 1):
            rows, labels = [], []
            for _ in range(ws.batch_size):
                prompt, answer = task.make_problem(rng)
                if rng.random() < ws.noise:
                    answer = task.corrupt(rng, prompt, answer)
                p_ids, a_ids = encode(prompt), encode(answer) + [eos]
                rows.append(p_ids + a_ids)
                labels.append([-100] * len(p_ids) + a_ids)
            width = max(map(len, rows))
            # Right padding for training; the pad positions are masked out of the loss.
            ids = torch.full((len(rows), width), tokenizer.pad_token_id)
            lab = torch.full((len(rows), width), -100)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, (r, lb) in enumerate(zip(rows, labels)):
                ids[i, : len(r)] = torch.tensor(r)
                lab[i, : len(lb)] = torch.tensor(lb)
                mask[i, : len(r)] = 1
            loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            schedule.step()
            loss_value = float(loss.item())
            if step % every == 0 and step < ws.steps:
                progress(step, ws.steps, time.perf_counter() - started)
    model.eval()
    return {"final_loss": loss_value}


def task_accuracy(model: Any, tokenizer: Any, task_name: str, *, n: int = 512, temperature: float | None = None,
                  seed: int = 99) -> float:
    """Share of `n` fresh problems answered exactly (greedy when temperature is None)."""
    import torch

    task = get_task(task_name)
    rng = random.Random(f"eval:{task_name}:{seed}")
    problems = [task.make_problem(rng) for _ in range(n)]
    enc = tokenizer([p for p, _ in problems], return_tensors="pt", padding=True, add_special_tokens=False)
    gen_kwargs: dict[str, Any] = {"max_new_tokens": task.max_answer_chars + 2, "do_sample": temperature is not None}
    if temperature is not None:
        gen_kwargs.update(temperature=temperature, top_k=None, top_p=None)
    model.eval()
    with _seeded(seed), torch.no_grad():
        out = model.generate(**enc, **gen_kwargs)
    texts = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=False)
    return sum(task.score(t, a) for t, (_, a) in zip(texts, problems)) / n


# --------------------------------------------------------------------------------------------
# The on-disk cache
# --------------------------------------------------------------------------------------------


def cache_root() -> Path:
    """`$GRPO_ABLATE_CACHE`, else `~/.cache/grpo-ablate`."""
    env = os.environ.get("GRPO_ABLATE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "grpo-ablate"


def _cache_key(settings: dict[str, Any]) -> str:
    import torch
    import transformers

    # Library versions are part of the key: the same seed gives different weights across them.
    full = {**settings, "torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    return hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:12]


@contextlib.contextmanager
def _file_lock(path: Path, waiting: Callable[[], None] = lambda: None) -> Iterator[None]:
    """An exclusive advisory lock, so parallel trials build a model once (POSIX; no-op elsewhere).
    `waiting` is called once when another process holds it, before this one blocks."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: atomic rename still prevents torn reads
            yield
            return
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _settings(name: str, task_name: str | None, extra_chars: str = "") -> tuple[str, dict[str, Any], Task | None]:
    """(folder label, everything that shapes the model, the task it is warm-started on)."""
    if name not in WARM_STARTED:
        raise ValueError(f"unknown built-in model {name!r}; choose one of {sorted(WARM_STARTED)}")
    task = get_task(task_name) if (task_name and WARM_STARTED[name]) else None
    shape = TinyModelSettings(**SHAPES.get(name, {}),
                              **({} if task_name else {"max_position_embeddings": DATASET_MAX_LENGTH}))
    settings: dict[str, Any] = {
        "format": FOLDER_FORMAT,
        "model": asdict(shape),
        "vocab": [*SPECIAL_TOKENS, *VOCAB_CHARS, *extra_chars],
        "warm_start": task.settings() if task else None,
    }
    label = f"tiny-{task.name}" if task else ("tiny-untrained" if task_name or not extra_chars else "tiny-dataset")
    if name in SHAPES:  # its own folder name too (the cache key already differs by shape)
        label = label.replace("tiny-", f"{name.removeprefix(BUILTIN_MODEL_PREFIX)}-", 1)
    return label, settings, task


def _complete(folder: Path) -> bool:
    """Whether `folder` holds a whole model: its config and its weights (the last files written)."""
    return (folder / "config.json").exists() and any(folder.glob("*.safetensors"))


def _distributed_rank() -> int | None:
    """This process's rank when torch.distributed is initialised in it, else None (torch not imported: None)."""
    import sys

    dist = getattr(sys.modules.get("torch"), "distributed", None)
    return dist.get_rank() if dist is not None and dist.is_available() and dist.is_initialized() else None


def _build_in_child(target: Path, name: str, task_name: str | None, dataset_chars: str,
                    log: Callable[[str], None]) -> Path:
    """Build the model in a fresh, non-distributed process: inside a distributed trial, transformers'
    save_pretrained writes config and weights only from global rank 0, and whichever rank takes the
    lock first builds (rank 1 would otherwise rename a folder holding only the tokenizer into place)."""
    import subprocess
    import sys

    from grpo_ablate.children import die_with_parent, importing_this_checkout

    request = json.dumps({"model": name, "task": task_name, "dataset_chars": dataset_chars})
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate.trainer.builtin.model", "--request", request],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=importing_this_checkout({**os.environ, "PYTHONUNBUFFERED": "1"}),
                            preexec_fn=die_with_parent())
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
        if line.startswith(("building", "waiting", "built")):
            log(line.rstrip())
    if proc.wait() != 0 or not _complete(target):
        raise RuntimeError(f"building the built-in model in a child process failed (exit {proc.returncode}): "
                           + " | ".join(lines[-5:]))
    return target


def builtin_model_path(name: str, task_name: str | None, *, log: Callable[[str], None] = print,
                       dataset_chars: str = "") -> Path:
    """The folder holding the built-in model (and its tokenizer), building it on first use.

    `builtin:tiny` with a built-in task is warm-started on that task; `builtin:tiny-untrained` is
    the seeded random model. With a user's dataset (no task), it is the seeded random model over
    the task characters plus `dataset_chars` (tokenizer.dataset_characters), taking prompts up to
    DATASET_MAX_LENGTH characters: a CPU smoke test of one's own data and rewards, end to end,
    before any GPU time (it learns nothing useful; it exercises the whole path). Either way it is
    on disk, so TRL can reload it as the reference model when beta > 0.
    """
    label, settings, task = _settings(name, task_name, dataset_chars)
    target = cache_root() / "models" / f"{label}-{_cache_key(settings)}"
    if _complete(target):
        return target
    if _distributed_rank() is not None:
        return _build_in_child(target, name, task_name, dataset_chars, log)
    waiting = lambda: log(f"waiting for the built-in model {label}: another run is building it (once; cached)")  # noqa: E731
    with _file_lock(target.with_suffix(".lock"), waiting):
        if _complete(target):  # another trial built it while we waited
            return target
        started = time.perf_counter()
        what = (f"a {task.warm_start.steps}-step warm start on {task.name}, then its accuracy"
                if task is not None else "a seeded random model")
        log(f"building built-in model {label} (once; cached): {what}, into {target}")
        shape = TinyModelSettings(**settings["model"])
        tokenizer = build_tokenizer(shape.max_position_embeddings, dataset_chars)
        model = build_tiny_model(tokenizer, shape)
        info: dict[str, Any] = {"settings": settings}
        if task is not None:
            info.update(_warm_start(model, tokenizer, task,
                                    lambda step, steps, elapsed: log(progress_words(label, step, steps, elapsed))))
            log(f"building built-in model {label}: measuring its accuracy on the task (once; cached)")
            info["greedy_accuracy"] = task_accuracy(model, tokenizer, task.name)
            info["sampled_accuracy_t1"] = task_accuracy(model, tokenizer, task.name, temperature=1.0)
        info["build_seconds"] = round(time.perf_counter() - started, 2)
        staging = Path(tempfile.mkdtemp(prefix=f".{label}-", dir=target.parent))
        try:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            portable_tokenizer_config(staging)
            (staging / "grpo_ablate_builtin.json").write_text(json.dumps(info, indent=2))
            if not _complete(staging):
                raise RuntimeError(f"saving the built-in model {label} wrote only {sorted(p.name for p in staging.iterdir())}")
            if target.exists():  # a torn folder from an older version of this code: set it aside, then replace it
                shutil.rmtree(target.rename(target.with_name(f".{target.name}-torn-{os.getpid()}")), ignore_errors=True)
            os.replace(staging, target)  # atomic: readers see no folder or a whole one
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        log(f"built {label} in {info['build_seconds']} s: " + json.dumps({k: v for k, v in info.items() if k != 'settings'}))
    return target


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build (or find) the cached built-in model for a task.")
    parser.add_argument("task", nargs="?", default="addition", choices=sorted(TASKS))
    parser.add_argument("--model", default="builtin:tiny", choices=sorted(n for n, warm in WARM_STARTED.items() if warm))
    parser.add_argument("--request", help=argparse.SUPPRESS)  # JSON {model, task, dataset_chars}: _build_in_child's
    args = parser.parse_args(argv)
    if args.request:
        request = json.loads(args.request)
        path = builtin_model_path(request["model"], request["task"], dataset_chars=request["dataset_chars"])
        print(f"built {path}" if _complete(path) else f"incomplete {path}", flush=True)
        return 0 if _complete(path) else 1
    path = builtin_model_path(args.model, args.task)
    info = json.loads((path / "grpo_ablate_builtin.json").read_text())
    print(path)
    print(json.dumps({k: v for k, v in info.items() if k != "settings"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
