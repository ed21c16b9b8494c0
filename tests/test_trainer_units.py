"""The trainer core's pure parts: spec files, launch commands, outcome classification, config kwargs."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict
import math
import signal
import subprocess
import sys

import pytest

from grpo_ablate.commands.run_one import _split_sets
from grpo_ablate.study.trial_spec import spec_from_sections
from grpo_ablate.launch import build_command, classify, request_stop
from grpo_ablate.core.space import Rounds
from grpo_ablate.contract.result import TrialResult
from grpo_ablate.contract.spec import DataSpec, EvalBudget, RewardEntry, StartFrom, TrialSpec
from grpo_ablate.core.vocab import Outcome


def spec(tmp_path, **kw) -> TrialSpec:
    return spec_from_sections(tmp_path / "t", data={"task": "addition"}, trainer={"num_generations": 4}, budget={"max_steps": 3}, **kw)


def test_spec_round_trips_and_fills_defaults(tmp_path):
    s = spec(tmp_path, params={"temperature": 0.7, "seed": 3}, rewards=["format", {"name": "task", "weight": 2}])
    assert s.model.name_or_path == "builtin:tiny" and s.hardware.vllm.mode == "none"
    assert s.trainer == {"temperature": 0.7, "seed": 3}  # params merged into the trainer; G is the plan's own
    assert s.num_generations == 4 and s.max_steps == 3 and s.rounds == Rounds(1, 1, 1)
    assert s.rewards == [RewardEntry("format"), RewardEntry("task", 2)]
    path = s.save()
    assert path.name == "spec.json"
    again = TrialSpec.load(path)
    assert again == s
    raw = json.loads(path.read_text())
    raw["surprise"] = 1
    with pytest.raises(ValueError, match="unknown keys"):
        TrialSpec.from_json(json.dumps(raw))


def test_launch_commands(tmp_path):
    one = build_command(spec(tmp_path), "s.json")
    assert one == [sys.executable, "-m", "grpo_ablate.trainer.worker", "s.json"]
    two = build_command(spec(tmp_path, hardware={"num_processes": 2}), "s.json")
    assert two[1:3] == ["-m", "torch.distributed.run"] and "--nproc_per_node" in two and two[two.index("--nproc_per_node") + 1] == "2"
    assert two[-3:] == ["-m", "grpo_ablate.trainer.worker", "s.json"]
    acc = build_command(spec(tmp_path, hardware={"num_processes": 2, "accelerate_config": "ds.yaml"}), "s.json")
    assert acc[1:3] == ["-m", "accelerate.commands.launch"] and acc[acc.index("--config_file") + 1] == "ds.yaml"
    with pytest.raises(ValueError, match="starts one process"):
        build_command(spec(tmp_path, hardware={"num_processes": 2, "command": "python"}), "s.json")


def _classify_with(s, rc=0, worker=None, ranks=(), timed_out=False, stop=None, log=""):
    return classify(s, rc, worker, list(ranks), timed_out=timed_out, stop_reason=stop, log_tail=log)


def test_outcome_classification(tmp_path):
    s = spec(tmp_path, timeout_s=30)
    assert _classify_with(s, worker={"outcome": "completed", "world_size": 1}) == (Outcome.COMPLETED, None)
    assert _classify_with(s, rc=-9, timed_out=True)[0] is Outcome.INTERRUPTED  # queued again, resumed
    assert "timeout" in _classify_with(s, rc=-9, timed_out=True)[1]
    # a SIGKILL alone is not evidence of running out of memory (tests/test_launch_oom.py has the rest)
    assert _classify_with(s, rc=-signal.SIGKILL)[0] is Outcome.INTERRUPTED
    assert _classify_with(s, rc=137)[0] is Outcome.INTERRUPTED
    # words in a log are not evidence of running out of memory: the worker's typed record is
    assert _classify_with(s, rc=1, log="torch.OutOfMemoryError: CUDA out of memory")[0] is Outcome.FAILED
    failed = _classify_with(s, rc=1, log="line 1\nImportError: nope\n")
    assert failed[0] is Outcome.FAILED and "ImportError: nope" in failed[1]
    # a failing non-zero rank outranks rank 0, which was killed without writing
    ranked = _classify_with(s, rc=1, ranks=[{"outcome": "oom", "rank": 1, "reason": "MemoryError: x"}])
    assert ranked == (Outcome.OOM, "rank 1: MemoryError: x")
    # fewer processes than asked for is a failure, not a quiet single-process run
    two = spec(tmp_path, hardware={"num_processes": 2})
    wrong = _classify_with(two, worker={"outcome": "completed", "world_size": 1})
    assert wrong[0] is Outcome.FAILED and "started 1 training process" in wrong[1]
    # a STOP that the worker could not honour in time still counts as the requested outcome
    assert _classify_with(s, rc=-15, stop="pruned")[0] is Outcome.PRUNED


def test_request_stop_writes_once(tmp_path):
    assert request_stop(tmp_path, "interrupted") is True
    assert request_stop(tmp_path, "pruned") is False
    assert (tmp_path / "STOP").read_text().strip() == "interrupted"


def test_result_to_dict_uses_outcome_values():
    assert TrialResult(Outcome.OOM, "x").to_dict()["outcome"] == "oom"
    assert {o.value for o in Outcome} == {"completed", "pruned", "oom", "failed", "interrupted", "running", "queued"}


def test_run_one_splits_trial_values_from_overrides():
    overrides, chosen = _split_sets(["num_generations=4", "temperature=0.9", "budget.max_steps=5", "learning_rate=1e-4"])
    assert chosen == {"num_generations": 4, "temperature": 0.9}
    assert overrides == ["search.num_generations=[4]", "search.temperature=0.9", "budget.max_steps=5",
                         "learning_rate=1e-4", "study.baseline={}"]
    # a list still means the study's search
    assert _split_sets(["num_generations=[2, 4]"]) == (["num_generations=[2, 4]"], {})


def test_parent_side_imports_no_torch():
    code = ("import sys, grpo_ablate.launch, grpo_ablate.contract.spec, grpo_ablate.contract.metrics, grpo_ablate.commands.run_one; "
            "bad = [m for m in ('torch', 'transformers', 'trl') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_config_kwargs_and_step_budget(tmp_path):
    pytest.importorskip("trl")
    from grpo_ablate.trainer.build import build_config_kwargs

    def steps(budget, trainer=None, world=1):
        return spec_from_sections(tmp_path / "s", trainer=trainer, budget=budget, hardware={"num_processes": world}).max_steps

    assert steps({"max_steps": 10}) == 10
    # 1000 completions, 16 per device x 2 processes x 2 accumulation = 64 per step -> ceil(15.6) = 16
    trainer = {"per_device_train_batch_size": 16, "gradient_accumulation_steps": 2}
    assert steps({"completions": 1000}, trainer, 2) == 16
    assert steps({"completions": 1000}, {**trainer, "num_iterations": 2}, 2) == 32
    assert steps({"completions": 1000, "max_steps": 5}, trainer, 2) == 5
    assert steps({"tokens": 10}, trainer, 1) is None

    s = spec_from_sections(tmp_path / "t", data={"task": "addition"},
                           trainer={"num_generations": 4, "logging_steps": 50, "save_strategy": "steps", "gradient_checkpointing": True},
                           budget={"completions": 640})
    kw = build_config_kwargs(s, world_size=1, reward_weights=[1.0, 0.5])
    assert kw["logging_steps"] == 1 and kw["output_dir"].endswith("/t/trainer")
    assert kw["save_strategy"] == "steps" and kw["report_to"] == "none"  # the user's choice kept, the rest filled
    assert kw["max_steps"] == 80  # 640 / 8 (TRL's default per-device batch)
    assert kw["reward_weights"] == [1.0, 0.5]
    assert "gradient_checkpointing" not in kw and kw.get("activation_checkpointing", kw.get("gradient_checkpointing")) is False
    import torch

    if not torch.cuda.is_available():
        assert kw["bf16"] is False and kw["use_cpu"] is True
    from trl import GRPOConfig

    config = GRPOConfig(**kw)  # TRL accepts it and derives the generation batch itself
    assert config.generation_batch_size == 8 and config.steps_per_generation == 1
    assert not math.isnan(config.learning_rate)


def test_retry_checkpoints_save_every_step_for_the_checkpointer_but_never_for_a_g_schedule(tmp_path):
    """The Checkpointer picks the steps that save (save_steps=1 is its placeholder, and it removes the
    older ones); a G schedule's trial has no Checkpointer (its round state is not in a checkpoint), so
    it keeps the study's own save settings instead of saving a whole checkpoint at every step."""
    pytest.importorskip("trl")
    import dataclasses

    from grpo_ablate.trainer.build import build_config_kwargs

    def kwargs(g, **trainer):
        s = spec_from_sections(tmp_path / str(g), data={"task": "addition"}, trainer={"num_generations": g, **trainer},
                               budget={"max_steps": 20})
        return build_config_kwargs(dataclasses.replace(s, checkpoint={"every": "auto", "keep": False}), world_size=1,
                                   reward_weights=[1.0])

    from grpo_ablate.core.schedule import Schedule, Switch

    g_schedule = Schedule((4, 8), (Switch("progress", 50.0),))

    assert kwargs(4)["save_strategy"] == "steps" and kwargs(4)["save_steps"] == 1
    assert kwargs(g_schedule)["save_strategy"] == "no"
    kept = kwargs(g_schedule, save_strategy="steps", save_steps=10)
    assert (kept["save_strategy"], kept["save_steps"]) == ("steps", 10)


CHAT_TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"


def _jsonl(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_prompts_from_a_local_jsonl_as_open_r1_builds_them(tmp_path):
    pytest.importorskip("datasets")
    from grpo_ablate.trainer.prompts import load_prompts
    from grpo_ablate.trainer.builtin.tokenizer import build_tokenizer

    rows = [{"problem": f"what is {i}+1?", "solution": f"${i + 1}$"} for i in range(5)]
    path = _jsonl(tmp_path / "train.jsonl", rows)
    tok = build_tokenizer()  # no chat template: plain text prompts, the system prompt in front
    data = {"dataset": str(path), "prompt_column": "problem", "system_prompt": "think first", "max_samples": 3}
    ds = load_prompts(DataSpec(**data), tok)
    assert len(ds) == 3 and ds[0]["prompt"] == "think first\n\nwhat is 0+1?" and ds[0]["solution"] == "$1$"
    assert "problem" not in ds.column_names  # became `prompt`; other columns stay for the rewards
    # a chat template given in the study: [system, user] messages for TRL to template
    ds = load_prompts(DataSpec(**{**data, "chat_template": CHAT_TEMPLATE}), tok)
    assert ds[1]["prompt"] == [{"role": "system", "content": "think first"}, {"role": "user", "content": "what is 1+1?"}]
    assert tok.chat_template == CHAT_TEMPLATE
    # a tokenizer with a template uses it unless told not to
    assert isinstance(load_prompts(DataSpec(**{**data, "chat_template": None}), tok)[0]["prompt"], list)
    assert isinstance(load_prompts(DataSpec(**{**data, "chat_template": False}), tok)[0]["prompt"], str)
    with pytest.raises(ValueError, match=r"prompt_column 'question' is not a column.*problem"):
        load_prompts(DataSpec(**{**data, "prompt_column": "question"}), tok)


def test_prompts_from_parquet_and_a_saved_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    from grpo_ablate.trainer.prompts import load_prompts
    from grpo_ablate.trainer.builtin.tokenizer import build_tokenizer

    ds = datasets.Dataset.from_dict({"prompt": ["a", "b"], "answer": ["1", "2"]})
    ds.to_parquet(str(tmp_path / "p.parquet"))
    ds.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"test": ds}).save_to_disk(str(tmp_path / "saved_dict"))
    tok = build_tokenizer()
    assert load_prompts(DataSpec(**{"dataset": str(tmp_path / "p.parquet")}), tok)["prompt"] == ["a", "b"]
    assert load_prompts(DataSpec(**{"dataset": str(tmp_path / "saved")}), tok)["answer"] == ["1", "2"]
    assert len(load_prompts(DataSpec(**{"dataset": str(tmp_path / "saved_dict"), "split": "test"}), tok)) == 2
    with pytest.raises(ValueError, match="unknown file type"):
        (tmp_path / "x.txt").write_text("hi")
        load_prompts(DataSpec(**{"dataset": str(tmp_path / "x.txt")}), tok)


def test_max_prompt_tokens_drops_long_prompts(tmp_path):
    pytest.importorskip("datasets")
    from grpo_ablate.trainer.prompts import load_prompts
    from grpo_ablate.trainer.builtin.tokenizer import build_tokenizer

    path = _jsonl(tmp_path / "d.jsonl", [{"prompt": "x" * n} for n in (3, 8, 12)])
    tok = build_tokenizer()  # one token per character
    assert load_prompts(DataSpec(**{"dataset": str(path), "max_prompt_tokens": 8}), tok)["prompt"] == ["xxx", "x" * 8]
    # with a chat template the templated length counts
    templated = load_prompts(DataSpec(**{"dataset": str(path), "max_prompt_tokens": 25, "chat_template": CHAT_TEMPLATE}), tok)
    assert [len(p[0]["content"]) for p in templated["prompt"]] == [3, 8]  # 6 ("<user>") + n + 11 ("<assistant>") <= 25
    with pytest.raises(ValueError, match="drops every one"):
        load_prompts(DataSpec(**{"dataset": str(path), "max_prompt_tokens": 1}), tok)


def test_prepare_keeps_a_pending_stop_but_clears_a_previous_run(tmp_path):
    from grpo_ablate.launch import prepare

    s = spec(tmp_path)
    s.path.mkdir(parents=True)
    request_stop(s.path, "interrupted")  # asked before the trial started: honoured
    prepare(s)
    assert (s.path / "STOP").exists()
    (s.path / "result.json").write_text("{}")  # a finished earlier run in the same folder: all stale
    (s.path / "metrics.jsonl").write_text("{}\n")
    prepare(s)
    assert not any((s.path / n).exists() for n in ("STOP", "result.json", "metrics.jsonl"))


def test_a_trial_stopped_before_it_starts_never_launches(tmp_path):
    from grpo_ablate.launch import run_trial

    s = spec(tmp_path)
    s.path.mkdir(parents=True)
    request_stop(s.path, "interrupted")
    result = run_trial(s)
    assert result.outcome is Outcome.INTERRUPTED and "before it started" in result.reason
    assert json.loads((s.path / "result.json").read_text())["outcome"] == "interrupted"
    assert not (s.path / "log.txt").exists()


def test_spec_defaults_are_the_study_schemas(tmp_path):
    from grpo_ablate.config import BudgetSection, DataSection, HardwareSection, ModelSection

    s = spec_from_sections(tmp_path, data={"task": "addition"}, hardware={"vllm": {"mode": "colocate"}})
    assert asdict(s.model) == ModelSection().model_dump() and asdict(s.data) == DataSection(task="addition").model_dump()
    assert asdict(s.hardware) == {**HardwareSection().model_dump(), "vllm": {**HardwareSection().vllm.model_dump(), "mode": "colocate"}}
    # the schema refuses it empty; the spec does not: every field unset, but the one switch, which is off
    assert asdict(s.budget) == {**{name: None for name in BudgetSection.model_fields}, "allow_inside_warmup": False}
    assert s.hardware.num_processes is None and s.num_processes == 1  # not set means one process
    assert s.max_steps is None and s.eval_budget == EvalBudget("completions", 0.0)


def test_the_plan_codec_round_trips_every_kind_of_g_and_the_branch_point(tmp_path):
    from grpo_ablate.core.schedule import Dynamic, PerPrompt, Schedule, Switch

    kinds = [8, Schedule((2, 4, 8), (Switch("progress", 30.0), Switch("signal", 0.3, 3))), Dynamic(8, 3), PerPrompt(8, 2, 16)]
    for g in kinds:
        s = spec_from_sections(tmp_path / "t", data={"task": "addition"}, params={"num_generations": g},
                               budget={"completions": 640}, start_from=StartFrom("/x/trainer/checkpoint-4", 4))
        again = TrialSpec.from_json(s.to_json())
        assert again == s and type(again.num_generations) is type(g) and again.num_generations == g
        assert again.start_from == StartFrom("/x/trainer/checkpoint-4", 4) and again.max_steps == 80
    raw = json.loads(s.to_json())
    assert raw["num_generations"] == {"kind": "adaptive", "label": "adaptive:8[2-16]", "g": 8, "low": 2, "high": 16}
    raw["num_generations"]["high"] = 12  # a hand edit of the numbers that leaves the label behind
    with pytest.raises(ValueError, match="label"):
        TrialSpec.from_json(json.dumps(raw))
    with pytest.raises(TypeError, match="schedule object"):
        spec_from_sections(tmp_path / "t", data={"task": "addition"}, trainer={"num_generations": "4->8@50%"})


def test_worker_calls_oom_only_for_memory_errors():
    from grpo_ablate.trainer.worker import classify_exception

    assert classify_exception(MemoryError())[0] is Outcome.OOM
    # CUDA's words count only where this process uses CUDA (tests/test_launch_oom.py has the typed cases)
    assert classify_exception(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))[0] is Outcome.FAILED
    assert classify_exception(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 9 bytes"))[0] is Outcome.OOM
    try:
        try:
            raise MemoryError("inner")
        except MemoryError as exc:
            raise RuntimeError("while generating") from exc
    except RuntimeError as outer:
        assert classify_exception(outer) == (Outcome.OOM, "MemoryError: inner")  # found down the chain
    assert classify_exception(ValueError("peak memory 3 GB is fine"))[0] is Outcome.FAILED


def test_a_rank_exits_with_its_code_after_the_exit_handlers_and_its_buffered_output(tmp_path):
    """exit_ranked skips only the interpreter's teardown: handlers (memory.json's writer) and buffered prints survive."""
    marker = tmp_path / "handler-ran"
    code = ("import atexit, pathlib, sys; from grpo_ablate.trainer.worker import exit_ranked; "
            f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes'); "
            "sys.stdout.write('buffered, no newline'); exit_ranked(3)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and proc.stdout == "buffered, no newline", proc.stderr
    assert marker.read_text() == "yes"


def test_advise_samples_with_trls_own_sampling_defaults():
    """A missing top_k is TRL's 0 (no cut), not generate()'s 50: advise samples what training samples."""
    import dataclasses

    from trl import GRPOConfig

    from grpo_ablate.trainer.sample import hf_sampling_kwargs

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    kwargs = hf_sampling_kwargs({"max_completion_length": 6}, 0.7, 4)
    for key in ("top_k", "top_p", "repetition_penalty"):
        assert kwargs[key] == defaults[key], key
    assert "min_p" not in kwargs and defaults["min_p"] is None
    assert kwargs["temperature"] == 0.7 and kwargs["num_return_sequences"] == 4 and kwargs["max_new_tokens"] == 6
    custom = hf_sampling_kwargs({"top_k": 20, "min_p": 0.1, "generation_kwargs": {"top_p": 0.9}}, 1.0, 2)
    assert (custom["top_k"], custom["min_p"], custom["top_p"]) == (20, 0.1, 0.9)


def test_grpo_config_exists_before_the_model_loads(tmp_path, monkeypatch):
    """ZeRO-3 loads partitioned only while a TrainingArguments with its config exists: GRPOConfig first."""
    pytest.importorskip("trl")
    from trl import GRPOConfig

    from helpers import tiny_spec
    from grpo_ablate.trainer import build

    order: list[str] = []
    post_init, load = GRPOConfig.__post_init__, build.load_model_and_tokenizer

    def config_made(self):
        order.append("config")
        post_init(self)

    def model_loaded(*args, **kwargs):
        order.append("model")
        return load(*args, **kwargs)

    monkeypatch.setattr(GRPOConfig, "__post_init__", config_made)
    monkeypatch.setattr(build, "load_model_and_tokenizer", model_loaded)
    built = build.build_trial(tiny_spec(tmp_path, steps=1, num_prompts=64), log=lambda _: None, echo=False)
    assert order == ["config", "model"] and built.trainer.args is built.config


def test_a_trial_starts_from_its_branch_point(tmp_path):
    """start_from: model, optimizer and scheduler state from another trial's checkpoint; training goes on
    from the step after it (the branch of issue 39's shared prefix)."""
    pytest.importorskip("trl")
    from helpers import tiny_spec
    from grpo_ablate.trainer.build import build_trial

    prefix = build_trial(tiny_spec(tmp_path / "prefix", steps=2, num_prompts=200, per_device_train_batch_size=8,
                                   save_strategy="steps", save_steps=2), log=lambda _: None, echo=False)
    prefix.trainer.train()
    folder = tmp_path / "prefix" / "trainer" / "checkpoint-2"
    spec = tiny_spec(tmp_path / "branch", steps=3, num_prompts=200, per_device_train_batch_size=8)
    spec = dataclasses.replace(spec, start_from=StartFrom(str(folder), 2))
    branch = build_trial(TrialSpec.from_json(spec.to_json()), log=lambda _: None, echo=False)
    assert branch.resume_from == str(folder)
    branch.trainer.train(resume_from_checkpoint=branch.resume_from)
    assert branch.trainer.state.global_step == 3
    steps = [json.loads(x)["step"] for x in (tmp_path / "branch" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [3]  # only the step after the branch point was trained
    wrong = dataclasses.replace(spec, start_from=StartFrom(str(folder), 1))
    with pytest.raises(ValueError, match="holds step 2"):
        build_trial(wrong, log=lambda _: None, echo=False)
    # with the prefix spec's fingerprint the trial checks the folder as a resume would (issue 52): an unsealed
    # folder has no manifest, and the trial ends interrupted (its prefix is trained again), never failed
    from grpo_ablate.contract.checkpoints import BranchPointInvalid
    from grpo_ablate.trainer.worker import classify_exception

    checked = dataclasses.replace(spec, start_from=StartFrom(str(folder), 2, "f" * 64))
    with pytest.raises(BranchPointInvalid, match="has no manifest.json") as refused:
        build_trial(checked, log=lambda _: None, echo=False)
    assert classify_exception(refused.value)[0] is Outcome.INTERRUPTED
