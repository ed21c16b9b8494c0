"""A trial's checkpoints: each one a verified unit, sealed when written and checked before it is resumed.

    grpo-ablate run studies/tiny-cpu.yaml    # a trial killed after a checkpoint resumes there when retried

A checkpoint is the trainer's own folder (weights, optimizer, scheduler, RNG states,
trainer_state.json) plus this package's part, `grpo_ablate/` inside it: the trial's per-step files
as they were at that step (metrics.jsonl, groups.jsonl, eval.jsonl, events.jsonl) and the
callbacks' clock (CLOCK_FILE: completions, tokens and training seconds counted so far, the
evaluation points passed, the data sampler's and group sampler's random states).

How a checkpoint is made a unit (`seal`): the trainer writes `<trial>/trainer/checkpoint-<step>`,
which is only a staging name; this package adds its part, fsyncs every file, writes MANIFEST_FILE
(every file's size and SHA-256, the step, and the trial spec's fingerprint), fsyncs it, and renames
the folder to `<trial>/checkpoints/checkpoint-<step>`, then fsyncs that folder. A kill at any point
leaves either no sealed checkpoint at that step or a complete one; a staging folder is never
resumed and is removed at the next start.

How it is trusted (`resumable`): the manifest must parse, name this trial's spec fingerprint and
the folder's step, and every file must have its recorded size and hash. Anything else (a truncated
safetensors file, a broken clock, another spec) makes the trial start over, and the reason is
written to the trial's log. A checkpoint that passes but still fails to load starts over too
(trainer/checkpoint_callback.py): restoring never fails a trial.

The spec fingerprint (`spec_fingerprint`) hashes the spec's canonical JSON (sorted keys) without
the fields that legitimately differ between attempts of one trial (FINGERPRINT_IGNORED): the trial
folder (a retry has its own), the timeout (re-estimated from measured trials), the process
environment (CPU shares, devices) and the checkpoint settings (when to save does not change what is
trained). Everything else (model, data, rewards, trainer arguments, budget, hardware, params,
evaluation) changes the run's future, so a changed value starts over. It takes the JSON dict, not a
class, so it holds whatever type writes spec.json.

Stdlib only, and in the contract because both sides use the format: the child seals and resumes
(trainer/checkpoint_callback.py); the parent (study/lifecycle.py, study/prefixes.py) verifies a branch
point, carries a predecessor's checkpoint into a retry's folder (moved when it lies in the study's own trial
folders, copied from anywhere else) and removes what is no longer needed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from grpo_ablate.contract.files import trainer_dir
from grpo_ablate.core.vocab import EVAL_FILE, EVENTS_FILE, GROUPS_FILE, METRICS_FILE

__all__ = ["BranchPointInvalid", "Checkpoint", "CARRIED_FILES", "CLOCK_FILE", "MANIFEST_FILE", "STATE_DIR",
           "FINGERPRINT_IGNORED", "checkpoints_dir", "spec_fingerprint", "sealed_checkpoints",
           "latest", "seal", "verify", "resumable", "discard", "restore_files", "remove_checkpoints", "prune_older",
           "carry_over"]

STATE_DIR = "grpo_ablate"  # this package's part of a checkpoint folder
CLOCK_FILE = "clock.json"
MANIFEST_FILE = "manifest.json"  # written last, inside the staging folder: sizes, hashes, step, spec fingerprint
MANIFEST_FORMAT = 1
CARRIED_FILES = (METRICS_FILE, GROUPS_FILE, EVAL_FILE, EVENTS_FILE)
# top-level spec.json fields that may differ between attempts of one trial (see the module docstring)
FINGERPRINT_IGNORED = ("trial_dir", "timeout_s", "env", "checkpoint", "host_memory_mb")
_NAME = re.compile(r"^checkpoint-(\d+)$")
_TRAINER_STATE = "trainer_state.json"
_CHUNK = 1 << 20


def checkpoints_dir(trial_dir: str | os.PathLike[str]) -> Path:
    """Where a trial's sealed checkpoints live."""
    return Path(trial_dir) / "checkpoints"


def spec_fingerprint(spec: Mapping[str, Any]) -> str:
    """SHA-256 of a trial spec's canonical JSON (its spec.json as a dict) without FINGERPRINT_IGNORED."""
    kept = {k: v for k, v in spec.items() if k not in FINGERPRINT_IGNORED}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


class BranchPointInvalid(ValueError):
    """The checkpoint a branch is to start from fails the checks a resume makes (`verify`): the trial ends
    interrupted, and the orchestrator trains the prefix again rather than failing the cell (study/prefixes.py)."""


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int

    @property
    def clock(self) -> dict[str, Any]:
        value = json.loads((self.path / STATE_DIR / CLOCK_FILE).read_text())
        if not isinstance(value, dict):
            raise ValueError(f"{CLOCK_FILE} holds {type(value).__name__}, not an object")
        return value


def _numbered(folder: Path) -> list[tuple[int, Path]]:
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        m = _NAME.match(entry.name)
        if m and entry.is_dir():
            found.append((int(m.group(1)), entry))
    return sorted(found)


def sealed_checkpoints(trial_dir: str | os.PathLike[str]) -> list[Checkpoint]:
    """The trial's sealed checkpoint folders, oldest first (sealed means renamed into place, not yet verified)."""
    return [Checkpoint(path, step) for step, path in _numbered(checkpoints_dir(trial_dir))]


def latest(trial_dir: str | os.PathLike[str]) -> Checkpoint | None:
    """The newest sealed checkpoint (not verified: `resumable` is what a resume trusts)."""
    found = sealed_checkpoints(trial_dir)
    return found[-1] if found else None


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) if directory else os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _write_synced(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def seal(trial_dir: str | os.PathLike[str], staging: str | os.PathLike[str], *, step: int, fingerprint: str,
         clock: Mapping[str, Any], after: Callable[[str], None] | None = None) -> Checkpoint:
    """Make the trainer's staging folder a sealed checkpoint; the checkpoint.

    Adds the trial's per-step files and the clock, fsyncs every file, writes the manifest (fsynced,
    renamed into place), fsyncs the folders, renames the folder to checkpoints/checkpoint-<step>,
    fsyncs that, and drops older checkpoints. `after(stage)` is called after each stage (the
    property tests stop the writer there, as a kill would).
    """
    done = after or (lambda stage: None)
    staging = Path(staging)
    state = staging / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    for name in CARRIED_FILES:
        source = Path(trial_dir) / name
        if source.is_file():
            shutil.copyfile(source, state / name)
            done(f"copied {name}")
    (state / CLOCK_FILE).write_text(json.dumps(dict(clock)))
    done("clock written")
    files = {}
    for path in _files(staging):
        _fsync(path)
        rel = path.relative_to(staging).as_posix()
        files[rel] = {"size": path.stat().st_size, "sha256": _digest(path)}
    done("files synced and hashed")
    manifest = {"format": MANIFEST_FORMAT, "step": int(step), "fingerprint": fingerprint, "files": files}
    _write_synced(staging / MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True))
    done("manifest written")
    for folder in sorted({p.parent for p in _files(staging)} | {staging}, key=lambda p: -len(p.parts)):
        _fsync(folder, directory=True)
    done("folders synced")
    home = checkpoints_dir(trial_dir)
    home.mkdir(parents=True, exist_ok=True)
    target = home / f"checkpoint-{int(step)}"
    if target.exists():  # a checkpoint of the same step from an earlier attempt: this one supersedes it
        shutil.rmtree(target)
    os.replace(staging, target)
    done("renamed")
    _fsync(home, directory=True)
    done("home synced")
    sealed = Checkpoint(target, int(step))
    prune_older(trial_dir, sealed)
    done("older pruned")
    return sealed


def verify(checkpoint: Checkpoint, fingerprint: str) -> str | None:
    """Why `checkpoint` cannot be resumed by a trial of spec `fingerprint`; None when every check passes."""
    try:
        manifest = json.loads((checkpoint.path / MANIFEST_FILE).read_text())
    except FileNotFoundError:
        return f"{checkpoint.path.name} has no {MANIFEST_FILE} (not written by this version, or never sealed)"
    except (OSError, ValueError) as e:
        return f"{checkpoint.path.name}/{MANIFEST_FILE} cannot be read: {type(e).__name__}: {e}"
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT or not isinstance(manifest.get("files"), dict):
        return f"{checkpoint.path.name}/{MANIFEST_FILE} is not a format-{MANIFEST_FORMAT} manifest"
    if manifest.get("fingerprint") != fingerprint:
        return (f"{checkpoint.path.name} was written for another trial spec (fingerprint {str(manifest.get('fingerprint'))[:12]}, "
                f"this trial's {fingerprint[:12]}): the study or the cell changed since")
    if manifest.get("step") != checkpoint.step:
        return f"{checkpoint.path.name}/{MANIFEST_FILE} names step {manifest.get('step')!r}"
    files: dict[str, Any] = manifest["files"]
    for needed in (_TRAINER_STATE, f"{STATE_DIR}/{CLOCK_FILE}"):
        if needed not in files:
            return f"{checkpoint.path.name}/{MANIFEST_FILE} does not list {needed}"
    for rel, info in sorted(files.items()):
        path = checkpoint.path / rel
        if not isinstance(info, dict) or ".." in Path(rel).parts:
            return f"{checkpoint.path.name}/{MANIFEST_FILE} has a bad entry for {rel!r}"
        try:
            size = path.stat().st_size
            if size != info.get("size"):
                return f"{checkpoint.path.name}/{rel} has {size} bytes, {info.get('size')} were written"
            if _digest(path) != info.get("sha256"):
                return f"{checkpoint.path.name}/{rel} does not match the SHA-256 written with it"
        except OSError as e:
            return f"{checkpoint.path.name}/{rel} cannot be read: {type(e).__name__}: {e}"
    return None


def resumable(trial_dir: str | os.PathLike[str], fingerprint: str) -> tuple[Checkpoint | None, list[str]]:
    """(the newest checkpoint that passes `verify`, why each newer one was rejected)."""
    rejected: list[str] = []
    for checkpoint in reversed(sealed_checkpoints(trial_dir)):
        why = verify(checkpoint, fingerprint)
        if why is None:
            return checkpoint, rejected
        rejected.append(why)
    return None, rejected


def discard(trial_dir: str | os.PathLike[str], *, keep: Checkpoint | None = None) -> None:
    """Remove every checkpoint but `keep`, and every staging folder the trainer left (a write that never sealed)."""
    for _, path in _numbered(trainer_dir(trial_dir)):
        shutil.rmtree(path, ignore_errors=True)
    for found in sealed_checkpoints(trial_dir):
        if keep is None or found.path != keep.path:
            shutil.rmtree(found.path, ignore_errors=True)


def restore_files(checkpoint: Checkpoint, trial_dir: str | os.PathLike[str]) -> None:
    """Put the checkpoint's per-step files back in the trial folder (a file it did not have yet is removed)."""
    state = checkpoint.path / STATE_DIR
    for name in CARRIED_FILES:
        target = Path(trial_dir) / name
        if (state / name).is_file():
            shutil.copyfile(state / name, target)
        else:
            target.unlink(missing_ok=True)


def prune_older(trial_dir: str | os.PathLike[str], keep: Checkpoint) -> None:
    """Remove the checkpoints older than `keep`, and staging folders up to its step: one checkpoint is enough."""
    for step, path in _numbered(checkpoints_dir(trial_dir)):
        if step < keep.step:
            shutil.rmtree(path, ignore_errors=True)
    for step, path in _numbered(trainer_dir(trial_dir)):
        if step <= keep.step:
            shutil.rmtree(path, ignore_errors=True)


def remove_checkpoints(trial_dir: str | os.PathLike[str]) -> int:
    """Remove every checkpoint of a trial, staging folders included (it ended for good); how many were sealed."""
    n = len(sealed_checkpoints(trial_dir))
    discard(trial_dir)
    return n


def carry_over(source_dir: str | os.PathLike[str], target_dir: str | os.PathLike[str], *, move: bool) -> Checkpoint | None:
    """Put a predecessor's newest sealed checkpoint into a retry's folder; the checkpoint carried, or None.

    `move` only for a folder the current study owns (on one file system a move is a rename, and
    a large model's checkpoint is many GB): its other checkpoints are then dropped. Anything
    else (a copied run folder's journal names the original's absolute paths) is copied, under a
    staging name renamed when complete, and the source is left as it was. Not verified here: the
    trial process verifies it against its own spec before resuming it.
    """
    found = latest(source_dir)
    if found is None:
        return None
    home = checkpoints_dir(target_dir)
    home.mkdir(parents=True, exist_ok=True)
    target = home / found.path.name
    if target.exists():
        shutil.rmtree(target)
    if move:
        shutil.move(os.fspath(found.path), os.fspath(target))
        remove_checkpoints(source_dir)
    else:
        staging = home / f".copying-{found.path.name}"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(found.path, staging)
        os.replace(staging, target)
    return Checkpoint(target, found.step)
