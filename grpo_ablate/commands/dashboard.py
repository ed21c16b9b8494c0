"""`grpo-ablate dashboard`: optuna-dashboard on a study's storage and artifact store.

    grpo-ablate dashboard studies/tiny-cpu.yaml --port 8080    # then open http://127.0.0.1:8080

The dashboard names each objective by its metric (reward_per_hour, not "Objective 0"), lists
every trial with its params and user attributes (reward_per_hour, stability_variance,
samples_per_second, outcome, ...), and shows each trial's artifacts: its headline metrics
(headline_metrics.csv), the per-step metrics table (metrics.jsonl), and its reward curve titled
with the trial's G, batch, temperature and seed. It binds to 127.0.0.1 unless told otherwise:
the dashboard can edit studies, so exposing it is the user's explicit choice.
"""

from __future__ import annotations

import argparse
import sys

from grpo_ablate.commands.common import load, set_value
from grpo_ablate.config import Study
from grpo_ablate.storage import mask_url, open_artifact_store, open_storage
from grpo_ablate.study.setup import name_objectives

__all__ = ["run", "serve", "banner"]


def run(args: argparse.Namespace) -> int:
    """`grpo-ablate dashboard`."""
    extra = [set_value("study.storage", args.storage)] if args.storage else []
    return serve(load(args, extra), host=args.host, port=args.port)


def serve(study: "Study", host: str = "127.0.0.1", port: int = 8080) -> int:
    from optuna_dashboard import run_server  # 1.4 s to import: only this command pays it

    url = study.storage_url
    shown = mask_url(url)
    if not study.study.storage and not study.output_dir.joinpath("study.journal").exists():
        print(f"grpo-ablate: no study storage at {shown} yet; run `grpo-ablate run` first", file=sys.stderr)
        return 2
    storage = open_storage(url)  # StudyError (exit 2, one line) when it cannot be opened
    _name_objectives(storage, study)
    artifacts = open_artifact_store(study.output_dir)
    print(banner(study, host, port), flush=True)
    try:
        run_server(storage, host=host, port=port, artifact_store=artifacts)
    except KeyboardInterrupt:
        pass
    except OSError as e:
        print(f"grpo-ablate: cannot serve on {host}:{port}: {e}", file=sys.stderr)
        return 1
    return 0


def banner(study: "Study", host: str, port: int) -> str:
    """What `dashboard` prints first: where the study lives (masked), and where the answer is. optuna-dashboard's
    landing page leads with its "Best Trial" (one seed's luckiest run) and an importance chart fitted by Optuna,
    which can contradict the effects measured over seeds; the answer is the study's note, so say so."""
    return (f"optuna-dashboard for study {study.study.name!r} ({mask_url(study.storage_url)}) on http://{host}:{port}"
            "  (Ctrl-C to stop)\n"
            "The answer (arms compared over the same seeds) is in the study's Note and in "
            "`grpo-ablate report`; the page's \"Best Trial\" is one seed's best run and its importance chart is "
            "Optuna's fit, not the measured effects.")


def _name_objectives(storage: object, study: "Study") -> None:
    """A study created before objectives were named gets its metric names now."""
    import optuna

    try:
        ostudy = optuna.load_study(study_name=study.study.name, storage=storage)  # type: ignore[arg-type]
    except KeyError:
        return  # not in this storage (yet): the dashboard lists what is there
    if ostudy.metric_names is None and len(ostudy.directions) == len(study.metric_names):
        name_objectives(ostudy, study)
