"""`grpo-ablate dashboard`: optuna-dashboard on a study's storage and artifact store.

    grpo-ablate dashboard studies/tiny-cpu.yaml --port 8080    # then open http://127.0.0.1:8080

The dashboard names each objective by its metric (reward_per_hour, not "Objective 0"), lists
every trial with its params and user attributes (reward_per_hour, stability_variance,
samples_per_second, outcome, ...), and shows each trial's artifacts: its headline metrics
(headline_metrics.csv), the per-step metrics table (metrics.jsonl), and its reward curve titled
with the trial's G, batch, temperature and seed. Its address opens on the study's Note, where
`grpo-ablate report` wrote the answer (three lines, the arms by their means over seeds, the
details), not on optuna-dashboard's study list or a study page led by one seed's "Best Trial".
It binds to 127.0.0.1 unless told otherwise:
the dashboard can edit studies, so exposing it is the user's explicit choice.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, make_server

from grpo_ablate.commands.common import add_study, load, set_value
from grpo_ablate.config import StudyConfig
from grpo_ablate.storage.store import mask_url, open_artifact_store, open_storage
from grpo_ablate.study.setup import name_objectives

__all__ = ["add_parser", "run", "serve", "banner", "answer_first", "landing_path"]


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """`dashboard`'s arguments (commands/cli.py registers every command module the same way)."""
    p = sub.add_parser("dashboard", help="optuna-dashboard on the study's storage and artifacts")
    add_study(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--storage", help="read the study from this storage URL")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """`grpo-ablate dashboard`."""
    extra = [set_value("study.storage", args.storage)] if args.storage else []
    return serve(load(args, extra), host=args.host, port=args.port)


def serve(study: "StudyConfig", host: str = "127.0.0.1", port: int = 8080) -> int:
    from optuna_dashboard import wsgi  # 1.4 s to import: only this command pays it

    url = study.storage_url
    shown = mask_url(url)
    if not study.study.storage and not study.output_dir.joinpath("study.journal").exists():
        print(f"grpo-ablate: no study storage at {shown} yet; run `grpo-ablate run` first", file=sys.stderr)
        return 2
    storage = open_storage(url)  # StudyError (exit 2, one line) when it cannot be opened
    study_id = _name_objectives(storage, study)
    landing = landing_path(study_id, (study.output_dir / "summary.json").exists())
    app = answer_first(wsgi(storage, artifact_store=open_artifact_store(study.output_dir)), landing)

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
            pass  # one line per request would bury the banner

    try:
        server = make_server(host, port, app, handler_class=Quiet)
    except OSError as e:
        print(f"grpo-ablate: cannot serve on {host}:{port}: {e}", file=sys.stderr)
        return 1
    print(banner(study, host, port, landing), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def landing_path(study_id: int | None, reported: bool) -> str:
    """Where `/` leads: the study's Note (the answer, once a report wrote it), else the study's page;
    the dashboard's study list when the study is not in the storage yet."""
    if study_id is None:
        return "/dashboard"
    return f"/dashboard/studies/{study_id}/note" if reported else f"/dashboard/studies/{study_id}"


def answer_first(app: Callable[..., Iterable[bytes]], landing: str) -> Callable[..., Iterable[bytes]]:
    """optuna-dashboard's app with `/` redirected to `landing`: its own landing page is the study list,
    and a study's first page leads with one seed's "Best Trial" and a seed-blind importance chart.
    Every other path is the dashboard's own."""

    def app_answer_first(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") in ("GET", "HEAD") and environ.get("PATH_INFO", "/") in ("", "/"):
            start_response("302 Found", [("Location", landing), ("Content-Length", "0")])
            return [b""]
        return app(environ, start_response)

    return app_answer_first


def banner(study: "StudyConfig", host: str, port: int, landing: str = "/dashboard") -> str:
    """What `dashboard` prints first: where the study lives (masked), and where the answer is. The
    address opens on the study's Note, the report's answer; the study's own page leads with
    optuna-dashboard's "Best Trial" (one seed's luckiest run) and an importance chart fitted by
    Optuna over single trials, which can contradict the effects measured over seeds."""
    return (f"optuna-dashboard for study {study.study.name!r} ({mask_url(study.storage_url)}) on http://{host}:{port}"
            "  (Ctrl-C to stop)\n"
            f"It opens on http://{host}:{port}{landing}: the answer (arms compared over the same seeds) is the "
            "study's Note, also printed by `grpo-ablate report`. The page's \"Best Trial\" is one seed's best run and "
            "its importance chart is Optuna's fit over single trials, not the measured effects.")


def _name_objectives(storage: object, study: "StudyConfig") -> int | None:
    """A study created before objectives were named gets its metric names now; its id in the storage
    (None when it is not there yet: the dashboard lists what is)."""
    import optuna  # with optuna_dashboard above: only this command pays for them

    try:
        ostudy = optuna.load_study(study_name=study.study.name, storage=storage)  # type: ignore[arg-type]
    except KeyError:
        return None
    if ostudy.metric_names is None and len(ostudy.directions) == len(study.metric_names):
        name_objectives(ostudy, study)
    return storage.get_study_id_from_name(study.study.name)  # type: ignore[attr-defined,no-any-return]
