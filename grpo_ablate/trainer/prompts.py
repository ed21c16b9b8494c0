"""A trial's prompts: the training set (a dataset file or folder, a hub id, or a built-in task), formatted
for the chat template or as plain text, over-long prompts dropped, and the held-out evaluation set
disjoint from it. Read by trainer/build.py (the trial) and trainer/sample.py (advise's sampling)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from grpo_ablate.contract.spec import DataSpec, EvaluationSpec
from grpo_ablate.core.prompt_file import prompt_file_problem

from .builtin.tasks import held_out_problems, task_dataset

__all__ = ["format_prompts", "load_prompt_sets", "load_prompts"]

DEFAULT_TASK_PROMPTS = 2000
# Dataset files by extension -> the `datasets` builder that reads them.
_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


def _load_source(data: DataSpec):
    """The raw dataset: a local file, a saved dataset folder, a loadable folder, or a hub id."""
    # lazy: datasets only when prompts load; this module imports without it
    from datasets import Dataset, DatasetDict, load_dataset, load_from_disk

    source = str(data.dataset)
    split = data.split or "train"
    path = Path(source).expanduser()
    if path.is_file():
        builder = _FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise ValueError(
                f"data.dataset {source!r}: unknown file type {path.suffix!r}; use one of {sorted(_FILE_BUILDERS)}"
            )
        problem = prompt_file_problem(path, data.prompt_column or "prompt", data.max_samples)
        if problem:  # datasets would train on "None", or fail with no line number
            raise ValueError(problem)
        return load_dataset(builder, data_files=str(path), split="train")
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        loaded = load_from_disk(str(path))
        if isinstance(loaded, DatasetDict):
            if split not in loaded:
                raise ValueError(f"data.split {split!r} not in the saved dataset {source!r} (has {sorted(loaded)})")
            loaded = loaded[split]
        assert isinstance(loaded, Dataset)
        return loaded
    return load_dataset(source, name=data.config_name, split=split)


def _use_chat(data: DataSpec, tokenizer) -> bool:
    """Whether prompts become chat messages: `chat_template` null = when the tokenizer has one."""
    setting = data.chat_template
    if isinstance(setting, str) and setting.strip():
        tokenizer.chat_template = setting  # a Jinja template given in the study
        return True
    if setting is False:
        return False
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if setting is True and not has_template:
        raise ValueError("data.chat_template is true but the tokenizer has no chat template; give one as a string")
    return has_template


def _raw_dataset(data: DataSpec, *, seed: int) -> tuple[Any, str]:
    """(dataset, prompt column) before formatting: a built-in task's draw or the named dataset."""
    if data.task:
        return task_dataset(data.task, int(data.num_prompts or DEFAULT_TASK_PROMPTS), seed=seed), "prompt"
    dataset = _load_source(data)
    column = data.prompt_column or "prompt"
    if column not in dataset.column_names:
        raise ValueError(
            f"data.prompt_column {column!r} is not a column of {data.dataset!r}; columns are {dataset.column_names}"
        )
    if data.max_samples:
        dataset = dataset.select(range(min(int(data.max_samples), len(dataset))))
    return dataset, column


def format_prompts(dataset: Any, column: str, data: DataSpec, tokenizer) -> Any:
    """Rows with a `prompt` column, built as Open R1 builds it.

    With a chat template: [system?, user] messages (TRL applies the template). Without: plain
    text, the system prompt (if any) prepended. Other columns stay, so rewards read them
    (`solution`, `answer`, ...). Prompts longer than data.max_prompt_tokens are dropped.
    """
    chat = _use_chat(data, tokenizer)
    system = data.system_prompt

    def to_prompt(value: Any, index: int) -> Any:
        if value is None or (isinstance(value, (str, list)) and not value) or (isinstance(value, str) and not value.strip()):
            # a hub dataset is not checked row by row beforehand: never train on "None" or on nothing
            raise ValueError(f"row {index + 1} of the prompts: {column} is {'null' if value is None else 'empty'}; "
                             "fix or filter that row (data.dataset)")
        if isinstance(value, list):  # already messages
            messages = list(value)
            if system and not (messages and messages[0].get("role") == "system"):
                messages = [{"role": "system", "content": system}, *messages]
            return messages
        if chat:
            messages = [{"role": "user", "content": str(value)}]
            if system:
                messages.insert(0, {"role": "system", "content": system})
            return messages
        return f"{system}\n\n{value}" if system else str(value)

    def to_prompts(rows: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        return {"prompt": [to_prompt(value, index) for value, index in zip(rows[column], indices)]}

    remove = [column] if column != "prompt" else []
    # a batch of rows per call (datasets' default 1,000), not a row: 2,000 rows took 0.13 s of a trial's start
    dataset = dataset.map(to_prompts, with_indices=True, batched=True, remove_columns=remove, desc="building prompts")
    limit = data.max_prompt_tokens
    if limit:
        dataset = _drop_long_prompts(dataset, tokenizer, int(limit))
    return dataset


def load_prompts(data: DataSpec, tokenizer, *, seed: int = 1234):
    """The training dataset with a `prompt` column (see format_prompts); no evaluation hold-out."""
    dataset, column = _raw_dataset(data, seed=seed)
    return format_prompts(dataset, column, data, tokenizer)


def load_prompt_sets(
    data: DataSpec, evaluation: EvaluationSpec | None, tokenizer, *, seed: int = 1234, log: Callable[[str], None] = print
) -> tuple[Any, Any | None]:
    """(training prompts, held-out evaluation prompts or None), disjoint by construction.

    - built-in task: its own held-out draw (another seed), every training prompt excluded;
    - evaluation.dataset / evaluation.split: those prompts, the first num_prompts rows;
    - otherwise: the last num_prompts rows of the training data, removed from training.
    In every case an evaluation prompt that also occurs in the training prompts is dropped.
    """
    from datasets import Dataset  # lazy: datasets only when prompts load; this module imports without it

    train, column = _raw_dataset(data, seed=seed)
    if not evaluation:
        return format_prompts(train, column, data, tokenizer), None
    n = int(evaluation.num_prompts or 128)
    if data.task:
        pairs = held_out_problems(data.task, n, exclude=set(train["prompt"]))
        held = Dataset.from_dict({"prompt": [p for p, _ in pairs], "answer": [a for _, a in pairs]})
    elif evaluation.dataset or evaluation.split:
        source = replace(data, dataset=evaluation.dataset or data.dataset, split=evaluation.split or "train", max_samples=None)
        held, _ = _raw_dataset(source, seed=seed)
        if column not in held.column_names:
            raise ValueError(f"the evaluation prompts have no {column!r} column; columns are {held.column_names}")
        held = held.select(range(min(n, len(held))))
    else:
        if len(train) <= n:
            raise ValueError(f"evaluation.num_prompts={n} would hold out all {len(train)} training prompts; lower it")
        held = train.select(range(len(train) - n, len(train)))
        train = train.select(range(len(train) - n))
    train = format_prompts(train, column, data, tokenizer)
    held = format_prompts(held, column, data, tokenizer)
    seen = {_prompt_key(p) for p in train["prompt"]}
    keep = [i for i, p in enumerate(held["prompt"]) if _prompt_key(p) not in seen]
    if len(keep) < len(held):
        log(f"evaluation: dropped {len(held) - len(keep)} held-out prompts that also occur in training")
        held = held.select(keep)
    if len(held) == 0:
        raise ValueError("no evaluation prompt is left once training prompts are excluded")
    if len(held) < n:
        log(f"evaluation: {len(held)} held-out prompts (asked for {n})")
    return train, held


def _prompt_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)


def _prompt_length(prompt: Any, tokenizer) -> int:
    if isinstance(prompt, list):
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
            ids = ids["input_ids"]
        return len(ids)
    return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])


def _drop_long_prompts(dataset, tokenizer, limit: int):
    """Keep prompts of at most `limit` tokens (as the model sees them): TRL no longer truncates."""
    before = len(dataset)
    kept = dataset.filter(lambda row: _prompt_length(row["prompt"], tokenizer) <= limit, desc="dropping long prompts")
    if len(kept) == 0:
        raise ValueError(f"data.max_prompt_tokens={limit} drops every one of the {before} prompts; raise it")
    if len(kept) < before:
        print(f"[grpo-ablate] data.max_prompt_tokens={limit}: dropped {before - len(kept)} of {before} prompts", flush=True)
    return kept
