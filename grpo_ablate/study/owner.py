"""Who owns what: one study per `output_dir`, and one run (host, pid, start time, run id) per running trial.

Trial folders are numbered by the study's trial numbers (`trials/00000`), and report.html,
summary.json, probe.json and advise.json have fixed names: a second study writing into the same
folder would replace the first one's files, and the first one's report would then show the
second one's steps. So the first command that writes into a folder records its owner in
`<output_dir>/.grpo-ablate-owner.json` (created atomically: of two studies starting together
exactly one wins), and every command that writes there refuses another owner (exit 2).

    python -c "from grpo_ablate.study.owner import read_owner; print(read_owner('runs/tiny-cpu'))"

A running trial records the run that runs it (`RunIdentity`): the host, the orchestrator's pid,
that pid's start time (/proc/<pid>/stat) and a random id drawn when the run starts. A pid alone
is not an identity: after a kill -9 the kernel gives the pid to another process sooner or later,
and a trial owned by "a live pid" would never be run again. A trial of this host is owned by a
live run only when all of it matches (`dead_owner`): the same pid with the same start time, and,
where that pid is this very process, this run's id (a second `run` in one process, as the
in-process CLI does, is another run).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from grpo_ablate.core.children import process_start_time
from grpo_ablate.config import Problem, StudyError
from grpo_ablate.storage.store import is_rdb_url
from grpo_ablate.storage.url import storage_identity as identity

if TYPE_CHECKING:
    from grpo_ablate.config import StudyConfig

__all__ = ["OWNER_FILE", "HOST", "RunIdentity", "new_run", "dead_owner", "claim_output_dir", "check_output_dir",
           "check_unowned_folder", "read_owner", "storage_identity"]

HOST = os.environ.get("GRPO_ABLATE_HOST") or socket.gethostname()  # override where containers share a name


@dataclass(frozen=True)
class RunIdentity:
    """One run of the orchestrator: host, pid, the pid's start time, and a random id."""

    host: str
    pid: int
    pid_started: str
    run_id: str

    def record(self) -> dict[str, str]:
        """What a trial's OWNER_RUN attribute holds (host and pid are attributes of their own)."""
        return {"pid_started": self.pid_started, "run_id": self.run_id}


def new_run() -> RunIdentity:
    """This process's identity for a run starting now (a fresh run id every call)."""
    pid = os.getpid()
    return RunIdentity(HOST, pid, process_start_time(pid) or "?", secrets.token_hex(8))


def dead_owner(host: str | None, pid: int | None, run: Mapping[str, str], current: RunIdentity) -> str | None:
    """Why the run that owns a trial is dead, judged from `current` (this run); None when it is or may be alive.

    Only a trial of this host can be judged (another host's run is alive for all this one knows).
    Dead: its pid is gone, or is now another process (another start time), or is this process but
    another run of it (another run id). A record without a start time (written before it was kept)
    is judged by the pid alone.
    """
    if host != current.host or pid is None:
        return None
    started = process_start_time(pid)
    if started is None:
        return f"its orchestrator (pid {pid} on {host}) is gone"
    recorded = run.get("pid_started")
    if recorded is not None and recorded != started:
        return (f"its orchestrator (pid {pid} on {host}, started at tick {recorded}) is gone: the pid is now "
                f"another process's (started at tick {started})")
    if pid == current.pid and run.get("run_id") not in (None, current.run_id):
        return f"its orchestrator was an earlier run in this process (run {run.get('run_id')}), which has ended"
    return None

OWNER_FILE = ".grpo-ablate-owner.json"


def storage_identity(study: "StudyConfig") -> str:
    """The storage as compared and shown: a journal inside the folder by its relative path (the
    folder may move), any other journal by its absolute path, a database by storage_url's
    identity (dialect, resolved host, port, database: no credentials, no driver)."""
    url = study.storage_url
    if is_rdb_url(url):
        return identity(url)
    journal = Path(url.removeprefix("journal:")).absolute()
    try:
        return str(journal.relative_to(study.output_dir.absolute()))
    except ValueError:
        return str(journal)


def _same_storage(recorded: str, mine: str) -> bool:
    """Whether the owner file's storage is this one: the recorded text may be an older masked URL."""
    return recorded == mine or (is_rdb_url(recorded) and is_rdb_url(mine) and identity(recorded) == identity(mine))


def read_owner(output_dir: str | os.PathLike[str]) -> dict[str, str] | None:
    """The recorded owner, None when the folder has none (new, or written before owners were kept)."""
    try:
        raw = json.loads((Path(output_dir) / OWNER_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"study": "?", "storage": "?"}  # unreadable: it belongs to someone; refuse rather than guess
    if not isinstance(raw, dict):
        return {"study": "?", "storage": "?"}
    return {"study": str(raw.get("study", "?")), "storage": str(raw.get("storage", "?"))}


def check_output_dir(study: "StudyConfig") -> None:
    """StudyError (one line: the folder, its owner, the fix) when another study owns the folder."""
    owner = read_owner(study.output_dir)
    if owner is None:
        return
    mine = {"study": study.study.name, "storage": storage_identity(study)}
    if owner["study"] == mine["study"] and _same_storage(owner["storage"], mine["storage"]):
        return

    raise StudyError([Problem(path="study.output_dir", message=(
        f"{study.output_dir} belongs to the study {owner['study']!r} (storage {owner['storage']}), not to "
        f"{mine['study']!r} (storage {mine['storage']}); its trial folders and reports would be overwritten. "
        f"Give this study its own folder (--set study.output_dir=...), or use the owner's study.name and storage"))])


def check_unowned_folder(study: "StudyConfig", study_names: list[str]) -> None:
    """A folder written before owners were recorded: refuse a new study where trial folders already are.

    `study_names`: the studies in this study's storage. A study that is not among them is new,
    and a new study's trial numbers start at 0, over the trial folders already there.
    """
    trials = study.output_dir / "trials"
    if read_owner(study.output_dir) is not None or study.study.name in study_names:
        return
    if not trials.is_dir() or not any(trials.iterdir()):
        return

    raise StudyError([Problem(path="study.output_dir", message=(
        f"{study.output_dir} already holds trial folders of another study, and {study.study.name!r} is a new study "
        f"whose trials would overwrite them. Give it its own folder (--set study.output_dir=...), or use the "
        f"study.name and storage that wrote them"))])


def claim_output_dir(study: "StudyConfig") -> None:
    """Record this study as the folder's owner unless one is recorded; StudyError when another is.

    Written to a temporary file and linked into place, so the owner file is never half-written
    and, of two studies claiming a new folder at once, the second finds the first's and is refused.
    """
    check_output_dir(study)
    folder = study.output_dir
    target = folder / OWNER_FILE
    tmp = folder / f".{OWNER_FILE}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if target.exists():
            return
        tmp.write_text(json.dumps({"study": study.study.name, "storage": storage_identity(study)}, indent=1) + "\n")
    except OSError as e:  # a full disk, a read-only folder: nothing else could be written there either
        if tmp.parent.is_dir():
            tmp.unlink(missing_ok=True)

        raise StudyError([Problem(path="study.output_dir", message=(
            f"cannot write {folder} ({e.strerror or e}): free some space or choose a writable folder"))]) from None
    try:
        os.link(tmp, target)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links: exclusive creation is still first-wins
        try:
            with open(target, "x") as f:
                f.write(tmp.read_text())
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)
    check_output_dir(study)  # lost the race to another study: refused like any later command
