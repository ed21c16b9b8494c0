"""The study's inputs checked on this machine: a local dataset's first rows, and each reward function.

    grpo-ablate validate study.yaml     # a missing prompt column or a typo'd reward fails here, not 25 s into a trial

What fails at a trial's start should fail in `validate`: on a cluster each such failure costs a
launch. For a local dataset (a .jsonl/.json/.csv/.parquet file or a `save_to_disk` folder) the
first rows are read: the prompt column must be there, and the columns the rewards read. Each
`module:function` reward is found in its module's source (parsed, never imported: validation
runs no user code) and its signature bound to the call TRL makes, f(prompts=..., completions=...,
completion_ids=..., trainer_state=..., one keyword per dataset column). What cannot be checked here (a hub dataset, a package this machine lacks) is a
warning that says so, never a silent pass and never a refusal to plan.
"""

from __future__ import annotations

import ast
import csv
import inspect
import json
from pathlib import Path
from typing import Any

from grpo_ablate.core.errors import Problem, StudyError, did_you_mean, echo
from grpo_ablate.core.safe_read import MB, kind_problem, read_text, text_stream
from grpo_ablate.config.names import UNCHECKED_PACKAGES, check_reward, module_spec
from grpo_ablate.config.places import is_local_dataset
from grpo_ablate.config.schema import DataSection, RewardSpec, StudyFile
from grpo_ablate.core.vocab import BUILTIN_MODEL_PREFIX, BUILTIN_TASKS

__all__ = ["check_inputs", "peek_rows", "PEEK_ROWS", "TRL_REWARD_KEYWORDS"]

PEEK_ROWS = 5  # enough to see the columns and a value of each
MAX_JSON_BYTES = 512 * MB  # a .json dataset is read whole to see its first rows
MAX_MODULE_BYTES = 16 * MB  # a reward module's source, parsed (never run) to read its signature
# What GRPOTrainer passes every reward besides the dataset's columns (trl 1.16, _calculate_rewards).
TRL_REWARD_KEYWORDS = ("prompts", "completions", "completion_ids", "trainer_state")
# Built-in rewards that read a dataset column (any one of them).
_BUILTIN_COLUMNS = {"accuracy": ("solution", "answer"), "task": ("answer",), **{t: ("answer",) for t in BUILTIN_TASKS}}


def peek_rows(data: DataSection, n: int = PEEK_ROWS) -> list[dict[str, Any]]:
    """The first `n` rows of a local dataset, as dicts. Raises OSError/ValueError when it cannot be read."""
    path = Path(str(data.dataset))
    if path.is_dir():
        # lazy: datasets only for a saved-dataset folder; every command imports config/
        from datasets import DatasetDict, load_from_disk

        ds = load_from_disk(str(path))
        if isinstance(ds, DatasetDict):
            if data.split not in ds:
                raise ValueError(f"has no split {data.split!r} (splits: {sorted(ds)})")
            ds = ds[data.split]
        return [dict(r) for r in ds.select(range(min(n, len(ds))))]
    suffix = path.suffix.lower()
    if (problem := kind_problem(path)) is not None:  # a FIFO would hang the read below
        raise ValueError(problem)
    if suffix == ".jsonl":
        rows = []
        with text_stream(path, "dataset", key="data.dataset") as f:
            for line in f:
                if line.strip():
                    rows.append(json.loads(line))
                if len(rows) >= n:
                    break
        return rows
    if suffix == ".json":
        raw = json.loads(read_text(path, "dataset", MAX_JSON_BYTES, key="data.dataset"))
        if isinstance(raw, dict):  # {"data": [...]} as load_dataset's `field` reads it
            raw = next((v for v in raw.values() if isinstance(v, list)), raw)
        if not isinstance(raw, list):
            raise ValueError("holds neither a list of records nor JSON lines")
        return [r for r in raw[:n] if isinstance(r, dict)]
    if suffix == ".csv":  # a BOM (Excel's UTF-8 CSV) dropped, as `datasets` drops it
        with text_stream(path, "dataset", key="data.dataset") as f:
            return [dict(r) for _, r in zip(range(n), csv.DictReader(f))]
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # lazy: pyarrow only for a parquet file

        batch = next(pq.ParquetFile(path).iter_batches(batch_size=n), None)
        return batch.to_pylist() if batch is not None else []
    raise ValueError(f"has a suffix ({suffix or 'none'}) that is not .jsonl/.json/.csv/.parquet")


def _columns(sf: StudyFile, problems: list[Problem], warnings: list[str]) -> list[str] | None:
    """The dataset's columns (from its first rows), or None when they cannot be read here."""
    data = sf.data
    if data.dataset is None:
        return None
    if not is_local_dataset(data.dataset) and not Path(data.dataset).exists():
        warnings.append(f"data.dataset {data.dataset!r} is a hub dataset: its columns (data.prompt_column and what "
                        f"the rewards read) cannot be checked here without downloading it; the first trial (or "
                        f"`grpo-ablate advise`) loads it")
        return None
    if not Path(data.dataset).exists():
        return None  # config/places.py reports the missing file
    try:
        rows = peek_rows(data)
    except StudyError as e:
        problems.append(e.problems[0])
        return None
    except (OSError, ValueError, ImportError) as e:
        problems.append(Problem(path="data.dataset", message=f"{echo(data.dataset)} cannot be read: {e}"))
        return None
    if not rows:
        problems.append(Problem(path="data.dataset", message=f"{echo(data.dataset)} has no rows"))
        return None
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if sf.model.name_or_path.startswith(BUILTIN_MODEL_PREFIX) and not isinstance(data.chat_template, str) and any(
            isinstance(r.get(data.prompt_column), list) for r in rows):
        problems.append(Problem(path="data.chat_template", message=(
            f"{data.dataset} holds chat messages in {data.prompt_column!r}, and {sf.model.name_or_path} is a "
            f"character-level model without a chat template, so every trial would fail applying one; give "
            f"data.chat_template (a Jinja template), or plain-text prompts")))
    if data.prompt_column not in columns:
        problems.append(Problem(path="data.prompt_column", message=(
            f"column {echo(data.prompt_column)} is not in {data.dataset} (its columns: {columns}); set "
            f"data.prompt_column to the column that holds the prompts{did_you_mean(data.prompt_column, columns)}")))
    return columns


def _reward_signature(name: str, path: str, problems: list[Problem],
                      warnings: list[str]) -> inspect.Signature | None:
    """The reward function's signature, read from its module's source without importing it.

    Validation never runs the user's module (it may import torch or open a sandbox connection);
    the function is found by parsing the file. None when there is nothing to bind against: a
    problem was recorded, the module is not installed here (a warning), or the name is bound by
    an assignment or an import (a factory's result), which only the trial can check.
    """
    module_name, _, attr = name.partition(":")
    folder, _, dotted = module_name.rpartition("/")
    spec = module_spec(dotted or module_name, folder or None)
    if spec is None:
        top = (dotted or module_name).split(".")[0]
        if top in UNCHECKED_PACKAGES:
            warnings.append(f"{path} ({name}): {top} is not installed on this machine, so this reward was not "
                            f"checked here; the trial machine needs {UNCHECKED_PACKAGES[top]}")
        return None
    origin = getattr(spec, "origin", None)
    if not origin or not str(origin).endswith(".py"):
        return None  # compiled or namespace: nothing to parse
    try:  # a BOM is valid Python (PEP 263): read_text drops it as the interpreter does
        tree = ast.parse(read_text(origin, "reward module", MAX_MODULE_BYTES, key=path), filename=origin)
    except StudyError as e:
        problems.append(e.problems[0])
        return None
    except (OSError, SyntaxError, ValueError) as e:
        problems.append(Problem(path=path, message=f"{echo(str(origin))} cannot be parsed: {e}"))
        return None
    first = attr.split(".")[0]
    defined: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defined.setdefault(n.id, node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                defined.setdefault((a.asname or a.name).split(".")[0], node)
        elif not isinstance(node, (ast.Expr, ast.If, ast.Try)):
            continue
        if isinstance(node, (ast.If, ast.Try)):  # conditional definitions (TYPE_CHECKING, fallbacks): present
            for n in ast.walk(node):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined.setdefault(n.name, n)
                elif isinstance(n, (ast.Import, ast.ImportFrom)):
                    for a in n.names:
                        defined.setdefault((a.asname or a.name).split(".")[0], n)
    dynamic = "__getattr__" in defined or any(  # lazy modules (trl.rewards) and star imports: names come at run time
        isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))
    if dynamic and first not in defined:
        return None
    if first not in defined:
        functions = sorted(k for k, v in defined.items() if isinstance(v, (ast.FunctionDef, ast.AsyncFunctionDef))
                           and not k.startswith("_"))
        problems.append(Problem(path=path, message=(
            f"module {echo(dotted or module_name)} ({origin}) has no function {echo(first)}"
            f"{did_you_mean(first, functions)}; its functions: {functions}")))
        return None
    found = defined[first]
    if "." in attr or not isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return _signature(found.args)


def _signature(args: ast.arguments) -> inspect.Signature:
    """An inspect.Signature with the parameters' names, kinds and whether they have defaults."""
    P = inspect.Parameter
    has = object()
    params: list[inspect.Parameter] = []
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    for i, a in enumerate(positional):
        kind = P.POSITIONAL_ONLY if i < len(args.posonlyargs) else P.POSITIONAL_OR_KEYWORD
        params.append(P(a.arg, kind, default=has if i >= first_default else P.empty))
    if args.vararg:
        params.append(P(args.vararg.arg, P.VAR_POSITIONAL))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        params.append(P(a.arg, P.KEYWORD_ONLY, default=has if d is not None else P.empty))
    if args.kwarg:
        params.append(P(args.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _check_signature(sig: inspect.Signature, name: str, path: str, columns: list[str] | None,
                     problems: list[Problem]) -> None:
    """Bind the call TRL makes; a reward that cannot take it fails at the trial's first step."""
    keywords: dict[str, Any] = {k: [] for k in (*TRL_REWARD_KEYWORDS, *(columns or ()))}
    if columns is None:  # the columns are unknown here: check the fixed part and the **kwargs it needs
        params = sig.parameters.values()
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            problems.append(Problem(path=path, message=(
                f"{name} must accept **kwargs: TRL passes every dataset column and trainer_state as keywords; "
                f"write def {name}(prompts, completions, completion_ids=None, **kwargs)")))
        return
    try:
        sig.bind(**keywords)
    except TypeError as e:
        problems.append(Problem(path=path, message=(
            f"{name}{sig} cannot take the call TRL makes, f(prompts=, completions=, completion_ids=, "
            f"trainer_state=, one keyword per dataset column {columns}): {e}; accept **kwargs and read only "
            f"columns the dataset has")))


def check_inputs(sf: StudyFile, warnings: list[str]) -> list[Problem]:
    """Every problem with the dataset's columns and the rewards; what cannot be checked here goes to `warnings`."""
    problems: list[Problem] = []
    columns = _columns(sf, problems, warnings)
    for i, r in enumerate(sf.rewards):
        name = r.name if isinstance(r, RewardSpec) else r
        path = f"rewards.{i}"
        if ":" not in name:
            need = _BUILTIN_COLUMNS.get(name)
            if need and columns is not None and not set(need) & set(columns):
                problems.append(Problem(path=path, message=(
                    f"the built-in reward {echo(name)} reads the column {' or '.join(map(repr, need))}, which "
                    f"{sf.data.dataset} lacks (its columns: {columns})")))
            continue
        if check_reward(name, path):
            continue  # config/names.py already says what is wrong with the name
        if isinstance(r, RewardSpec) and r.args:
            continue  # a factory and its arguments: what it returns is checked when the trial builds it
        sig = _reward_signature(name, path, problems, warnings)
        if sig is not None:
            _check_signature(sig, name.partition(":")[2], path, columns, problems)
    return problems
