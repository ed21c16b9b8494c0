"""Two processes on gloo (CPU): the stop decision and held-out evaluation agree across ranks.

    HF_HUB_OFFLINE=1 python -m pytest -q tests/test_eval_distributed.py

- The seconds budget is rank 0's decision, broadcast (issue 19, item 5): real StopSwitch
  objects in two torchrun processes, no training, ~15 s.
- Held-out evaluation on every rank (item 3): a real 2-rank trial of the tiny model under
  torchrun whose model enters a collective in every forward pass, as a ZeRO-3/FSDP model's
  parameter gathers do (accelerate refuses FSDP on CPU); every rank evaluates its share, rank 0
  writes rows whose completions equal a one-process run's, prompt for prompt. A rank-0-only
  evaluation, or ranks running different numbers of forward passes, would hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import free_port
from grpo_ablate.contract.metrics import read_jsonl
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.trainer.builtin.recipe import TINY_CPU_TRAINER
from grpo_ablate.core.vocab import EVAL_FILE, Outcome
from grpo_ablate.contract.spec import EvaluationSpec

ROOT = Path(__file__).resolve().parents[1]

_STOP_SCRIPT = textwrap.dedent('''
    import json, sys, time
    import torch.distributed as dist
    from transformers import TrainerControl, TrainerState
    from grpo_ablate.trainer.callbacks import StopSwitch

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    trial = sys.argv[1]
    state = TrainerState()
    state.is_world_process_zero = rank == 0
    out = {"rank": rank}
    switch = StopSwitch(trial, max_seconds=1.0)
    switch.started = time.perf_counter() - 5.0      # 5 s since the start on both clocks
    # rank 0 spent 100 s evaluating (paused): its training time is under the budget; rank 1's clock
    # did not count that pause. A MAX over ranks stopped here; rank 0's decision goes on.
    switch.paused_seconds = 100.0 if rank == 0 else 0.0
    out["rank0_under_budget"] = switch.on_step_end(None, state, TrainerControl()).should_training_stop
    # and the other way round: rank 0 is over the budget, rank 1 (paused) is not -> both stop
    switch.paused_seconds = 0.0 if rank == 0 else 100.0
    out["rank0_over_budget"] = switch.on_step_end(None, state, TrainerControl()).should_training_stop
    out["reason"] = switch.stop_reason
    # the parent's STOP file (argv[2] holds one): every rank stops, "pruned"
    stop = StopSwitch(sys.argv[2], max_seconds=None)
    out["stop_file"] = stop.on_step_end(None, state, TrainerControl()).should_training_stop
    out["stop_reason"] = stop.stop_reason
    import os; open(os.path.join(os.environ["RESULT_DIR"], f"rank{rank}.json"), "w").write(json.dumps(out))
    from grpo_ablate.trainer.worker import exit_ranked
    dist.destroy_process_group()
    exit_ranked(0)          # as the worker's ranks end: gloo's threads can abort a normal exit
''')


def _torchrun(script: Path, *args: str, timeout: float = 180) -> list[dict]:
    """Run `script` on 2 gloo ranks; each rank's result from its own file (two ranks printing to one
    pipe can interleave their lines)."""
    results = script.parent / f"{script.stem}-results"
    results.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "RESULT_DIR": str(results)}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                           "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(script), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(p.read_text()) for p in sorted(results.glob("rank*.json"))]
    assert len(rows) == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    return sorted(rows, key=lambda r: r["rank"])


def test_seconds_budget_and_stop_file_are_rank0s_decision(tmp_path):
    script = tmp_path / "stop.py"
    script.write_text(_STOP_SCRIPT)
    (tmp_path / "asked").mkdir()
    (tmp_path / "asked" / "STOP").write_text("pruned")
    rows = _torchrun(script, str(tmp_path), str(tmp_path / "asked"))
    assert [r["rank"] for r in rows] == [0, 1]
    assert [r["rank0_under_budget"] for r in rows] == [False, False]
    assert [r["rank0_over_budget"] for r in rows] == [True, True]
    assert all("seconds budget" in r["reason"] for r in rows)
    assert [r["stop_file"] for r in rows] == [True, True] and {r["stop_reason"] for r in rows} == {"pruned"}


EVAL = {"num_prompts": 23, "temperature": 0, "samples_per_prompt": 1, "points": 1, "show_prompts": 23}

# accelerate 1.15 enables FSDP only for GPU-like device types (accelerate/state.py: the FSDP branch
# lists MULTI_GPU, MULTI_NPU, ...; not MULTI_CPU), so on CPU the gathers of a sharded model are
# reproduced by what makes them dangerous: a collective inside every forward pass of the model.
_SHARDED_SCRIPT = textwrap.dedent('''
    import json, sys
    import torch, torch.distributed as dist
    from grpo_ablate.trainer.build import build_trial
    from grpo_ablate.contract.spec import TrialSpec

    spec = TrialSpec.load(sys.argv[1])
    built = build_trial(spec)
    calls = [0]
    def gather_like_zero3(module, args):   # every forward enters a collective, as a ZeRO-3/FSDP gather does
        calls[0] += 1
        dist.all_reduce(torch.zeros(1))
    built.trainer.model.register_forward_pre_hook(gather_like_zero3)
    built.trainer.train()
    import os; open(os.path.join(os.environ["RESULT_DIR"], f"rank{dist.get_rank()}.json"), "w").write(
        json.dumps({"rank": dist.get_rank(), "forwards": calls[0]}))
    from grpo_ablate.trainer.collective import leave_process_group
    from grpo_ablate.trainer.worker import exit_ranked
    leave_process_group()   # a rank ends as the worker's do: gloo's threads can abort a normal exit
    exit_ranked(0)
''')


def _spec(tmp: Path, name: str, processes: int):
    spec = spec_from_sections(
        tmp / name, model={"name_or_path": "builtin:tiny"}, data={"task": "addition", "num_prompts": 200},
        trainer={**TINY_CPU_TRAINER, "per_device_train_batch_size": 32 // processes, "num_generations": 8, "seed": 0},
        budget={"max_steps": 2}, hardware={"num_processes": processes})
    spec.evaluation = EvaluationSpec(**EVAL)
    return spec


@pytest.mark.slow
def test_two_ranks_with_a_collective_per_forward_evaluate_every_prompt_like_one_process(tmp_path):
    from grpo_ablate.trainer.worker import run_spec

    spec = _spec(tmp_path, "two", 2)
    spec.save()
    script = tmp_path / "sharded.py"
    script.write_text(_SHARDED_SCRIPT)
    ranks = _torchrun(script, str(Path(spec.trial_dir) / "spec.json"), timeout=400)  # a hang fails by timeout
    assert [r["rank"] for r in ranks] == [0, 1] and ranks[0]["forwards"] == ranks[1]["forwards"] > 0
    rows = read_jsonl(tmp_path / "two" / EVAL_FILE)[0]
    assert [r["point"] for r in rows] == [0, 1, 2] and all(r["ranks"] == 2 for r in rows)
    assert all(r["num_prompts"] == 23 for r in rows)  # 12 + 11: the short rank padded its generate calls

    outcome, payload = run_spec(_spec(tmp_path, "one", 1))
    assert outcome is Outcome.COMPLETED, payload.get("traceback")
    single = read_jsonl(tmp_path / "one" / EVAL_FILE)[0]
    # before the first step both runs hold the same weights: greedy completions match prompt for prompt,
    # so the gathered rows are in prompt order and nothing was lost or doubled
    texts = lambda row: [(s["prompt"], [c["text"] for c in s["completions"]]) for s in row["samples"]]  # noqa: E731
    assert len(texts(rows[0])) == 23 and texts(rows[0]) == texts(single[0])
    assert rows[0]["per_prompt"] == single[0]["per_prompt"]
