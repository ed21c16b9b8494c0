"""The built-in model: a 2-layer, 64-wide Qwen2 (~135k parameters), warm-started and cached on disk.

A randomly initialised model never answers a task correctly, so GRPO would see only
zero-spread groups and learn nothing. `builtin:tiny` is therefore warm-started (supervised,
once) on answers that carry the task's typical slip most of the time: a learner that knows how
to add but forgets the carry. GRPO's verified reward then has one clear, learnable job.

The model and its tokenizer are saved under `$GRPO_ABLATE_CACHE` (default
`~/.cache/grpo-ablate`), in a folder named by a hash of every setting that shapes it and of the
torch/transformers versions. It is written to a temporary folder, checked whole (`entry_problem`:
every file there, config.json parsed, every tensor of model.safetensors present with its bytes, none
empty), given a manifest of its files' sizes and SHA-256, and only then renamed into place, under a
file lock, so parallel trials build it once and never see half a model. A cached folder is checked
the same way each time it is used; one that fails (a folder published without its weights was seen,
and then every later build failed on the rename with ENOTEMPTY) is moved aside with a line saying
why, and built again. It is never built in a process where torch.distributed is initialised (any
rank: transformers' save_pretrained writes config and weights only from global rank 0, so rank 1
saved a tokenizer-only folder) or where a ZeRO-3 DeepSpeed config is alive (its parameters would be
saved partitioned, as empty tensors): there a fresh child process builds it.
Because it lives on disk, `beta > 0` works: TRL reloads the reference model from the policy's path.

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
import math
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from grpo_ablate.core.children import die_with_parent, importing_this_checkout
from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX

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
    "entry_problem",
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
    import torch  # lazy: this module imports without torch (tests/test_builtin_registries.py)

    state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def build_tiny_model(tokenizer: Any, settings: TinyModelSettings = TinyModelSettings()) -> Any:
    """A randomly initialised tiny Qwen2, seeded so every build is identical."""
    import torch  # lazy: this module imports without torch (tests/test_builtin_registries.py)
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
    import torch  # lazy: this module imports without torch (tests/test_builtin_registries.py)

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
    import torch  # lazy: this module imports without torch (tests/test_builtin_registries.py)

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
    import torch  # lazy: this module imports without torch (tests/test_builtin_registries.py)
    import transformers

    # Library versions are part of the key: the same seed gives different weights across them.
    full = {**settings, "torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    return hashlib.sha256(json.dumps(full, sort_keys=True).encode()).hexdigest()[:12]


LOCK_WAIT_S = 3600.0  # a build takes minutes on a busy machine; an hour behind another process's lock is a stuck build


@contextlib.contextmanager
def _file_lock(path: Path, waiting: Callable[[], None] = lambda: None, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """An exclusive advisory lock, so parallel trials build a model once (POSIX; no-op elsewhere).
    `waiting` is called once when another process holds it; after `wait_s` seconds of waiting, TimeoutError
    naming the lock (no wait without a deadline)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            import fcntl  # POSIX only (the except below)
        except ImportError:  # pragma: no cover - Windows: atomic rename still prevents torn reads
            yield
            return
        deadline: float | None = None
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is None:
                    waiting()
                    deadline = time.monotonic() + wait_s
                elif time.monotonic() > deadline:
                    raise TimeoutError(f"another process has held {path} for {wait_s:.0f} s while building the built-in "
                                       "model: a stuck build? End it (`fuser` names it) and run again") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------------
# What a whole cached model folder holds
# --------------------------------------------------------------------------------------------

INFO_FILE = "grpo_ablate_builtin.json"
MANIFEST_FILE = "grpo_ablate_files.json"  # written last before the rename: every other file's size and SHA-256
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", INFO_FILE)
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def _safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file is not a whole set of weights: its header (stdlib), each tensor's bytes, none empty."""
    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{path.name} is {len(head)} bytes long"
            (n,) = struct.unpack("<Q", head)
            if n > 100 * 2**20:
                return f"{path.name} names a header of {n} bytes"
            header = json.loads(f.read(n))
        size = path.stat().st_size
    except (OSError, ValueError) as e:
        return f"{path.name} cannot be read as safetensors ({type(e).__name__}: {e})"
    tensors = {k: v for k, v in header.items() if k != "__metadata__"} if isinstance(header, dict) else {}
    if not tensors:
        return f"{path.name} holds no tensors"
    end = 0
    for name, info in tensors.items():
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if not isinstance(shape, list) or not isinstance(offsets, list) or len(offsets) != 2:
            return f"{path.name}: tensor {name} has no shape or offsets"
        count = math.prod(int(d) for d in shape)
        if count == 0:  # what a ZeRO-3 partitioned parameter is saved as: an empty placeholder
            return f"{path.name}: tensor {name} is empty (shape {shape}): saved partitioned?"
        if offsets[1] - offsets[0] != count * _DTYPE_BYTES.get(str(info.get("dtype")), 0):
            return f"{path.name}: tensor {name} has {offsets[1] - offsets[0]} bytes for shape {shape}"
        end = max(end, int(offsets[1]))
    if 8 + n + end != size:
        return f"{path.name} has {size} bytes, its header accounts for {8 + n + end}"
    return None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def entry_problem(folder: Path) -> str | None:
    """Why a cached model folder cannot be used (a file missing or empty, config.json not JSON, weights not whole, a
    file that is not what its manifest recorded); None when it is whole. Cheap: the tiny models are a few MB."""
    if not folder.is_dir():
        return "it is not a folder"
    for name in REQUIRED_FILES:
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size == 0:
            return f"{name} is empty"
    try:
        if not isinstance(json.loads((folder / "config.json").read_text()), dict):
            return "config.json is not a JSON object"
    except (OSError, ValueError) as e:
        return f"config.json cannot be read ({type(e).__name__}: {e})"
    if (problem := _safetensors_problem(folder / "model.safetensors")) is not None:
        return problem
    manifest = folder / MANIFEST_FILE
    if manifest.is_file():  # folders published before manifests were kept are checked by their structure alone
        try:
            files = json.loads(manifest.read_text())["files"]
            for name, info in files.items():
                path = folder / name
                if ".." in Path(name).parts or not path.is_file() or path.stat().st_size != info["size"] \
                        or _digest(path) != info["sha256"]:
                    return f"{name} is not the file its manifest recorded"
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            return f"{MANIFEST_FILE} cannot be read ({type(e).__name__}: {e})"
    return None


def _seal(staging: Path) -> None:
    """Check a freshly built folder whole, fsync its files and write its manifest: only then is it published."""
    problem = entry_problem(staging)
    if problem is not None:
        raise RuntimeError(f"the built-in model was built incompletely ({problem}); nothing was published")
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(staging.iterdir()):
        if path.is_file():
            with path.open("rb") as f:
                os.fsync(f.fileno())
            files[path.name] = {"size": path.stat().st_size, "sha256": _digest(path)}
    with (staging / MANIFEST_FILE).open("w") as f:
        f.write(json.dumps({"files": files}, indent=1, sort_keys=True))
        f.flush()
        os.fsync(f.fileno())


def _move_aside(target: Path, why: str, log: Callable[[str], None]) -> None:
    """A cached folder that failed its check: renamed out of the way (kept for a look), so the build can publish."""
    aside = target.with_name(f".{target.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    os.replace(target, aside)
    log(f"the cached built-in model {target} is not whole ({why}): moved aside to {aside.name}; building it again")


def _partitioning() -> bool:
    """Whether a ZeRO-3 DeepSpeed config is alive in this process (transformers then partitions what it builds and
    saves empty placeholders for the weights). Asked only where transformers is already imported."""
    deepspeed = sys.modules.get("transformers.integrations.deepspeed")
    try:
        return bool(deepspeed is not None and deepspeed.is_deepspeed_zero3_enabled())
    except Exception:  # noqa: BLE001 - an unanswerable question means: build where nothing partitions
        return True


def _distributed_rank() -> int | None:
    """This process's rank when torch.distributed is initialised in it, else None (torch not imported: None)."""
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    return dist.get_rank() if dist is not None and dist.is_available() and dist.is_initialized() else None


def _why_in_a_child() -> str | None:
    """Why this process must not build the model itself, or None. Any rank of an initialised torch.distributed
    (DDP or DeepSpeed): transformers' save_pretrained writes config and weights only from global rank 0, so
    whichever rank took the lock first decided whether the folder got its weights. A live ZeRO-3 config: its
    parameters are saved partitioned, as empty tensors."""
    rank = _distributed_rank()
    if rank is not None:
        return f"torch.distributed is initialised in this one (rank {rank}; transformers saves weights only from rank 0)"
    if _partitioning():
        return "a ZeRO-3 config is alive in this one"
    return None


CHILD_BUILD_S = 3600.0  # the whole build in a child process: minutes, bounded (no wait without a deadline)


def _build_in_child(target: Path, name: str, task_name: str | None, dataset_chars: str, log: Callable[[str], None],
                    why: str) -> Path:
    """Build (or find) the model in a fresh process, where no process group or partitioning context lives (that
    process takes the build lock, repairs and publishes as any other); its lines go to `log`. `target` is checked
    whole afterwards: a child that exits 0 is not trusted alone."""
    request = json.dumps({"model": name, "task": task_name, "dataset_chars": dataset_chars})
    log(f"building the built-in model in a child process: {why}")
    proc = subprocess.Popen([sys.executable, "-m", __name__, "--request", request], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=importing_this_checkout({**os.environ, "PYTHONUNBUFFERED": "1"}),
                            preexec_fn=die_with_parent())
    lines: list[str] = []

    def relay() -> None:  # its progress lines, as they come; the wait below has the deadline
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            log(line.rstrip())

    reader = threading.Thread(target=relay, name="builtin-model-child", daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout=CHILD_BUILD_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
        raise TimeoutError(f"building the built-in model {name} took over {CHILD_BUILD_S:.0f} s in a child process") from None
    reader.join(timeout=5)
    problem = entry_problem(target)
    if code != 0 or problem is not None:
        raise RuntimeError(f"building the built-in model {name} in a child process failed (exit {code}"
                           f"{'; ' + problem if problem else ''}): " + " | ".join(lines[-5:]))
    return target


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
    if entry_problem(target) is None:
        return target
    if (why := _why_in_a_child()) is not None:
        return _build_in_child(target, name, task_name, dataset_chars, log, why)
    waiting = lambda: log(f"waiting for the built-in model {label}: another run is building it (once; cached)")  # noqa: E731
    with _file_lock(target.with_suffix(".lock"), waiting):
        problem = entry_problem(target)
        if problem is None:  # another trial built it while we waited
            return target
        if target.exists() or target.is_symlink():
            _move_aside(target, problem, log)
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
            (staging / INFO_FILE).write_text(json.dumps(info, indent=2))
            _seal(staging)  # whole, synced, its manifest written: only then published
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
    parser.add_argument("--request", help=argparse.SUPPRESS)  # _build_in_child's: {"model", "task", "dataset_chars"}
    args = parser.parse_args(argv)
    if args.request:
        asked = json.loads(args.request)
        path = builtin_model_path(asked["model"], asked["task"], log=lambda m: print(m, flush=True),
                                  dataset_chars=asked["dataset_chars"])
        problem = entry_problem(path)
        print(f"built {path}" if problem is None else f"incomplete {path}: {problem}", flush=True)
        return 0 if problem is None else 1
    path = builtin_model_path(args.model, args.task)
    info = json.loads((path / INFO_FILE).read_text())
    print(path)
    print(json.dumps({k: v for k, v in info.items() if k != "settings"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
