"""Nothing silent: a setting that is given is honoured or refused, and every failure says why.

Generated where the class is open: pairs of summaries for `compare` (a gate that checked nothing
must not pass), G policies x vLLM modes (refused at validate, not inside a GPU trial), `run-one`
values (`dynamic:2[3]` is the user's string, not YAML), trial endings with empty reasons (every
`[trial N] failed` line and "the last reasons:" say something). And a raced study whose
study.min_effect or racing section changed between runs is refused before any trial.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import MINIMAL_STUDY, cli_inprocess
from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.commands.compare import compare_main
from grpo_ablate.config import StudyError, load_study

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _study(folder: Path, extra: str = "") -> Path:
    path = folder / "study.yaml"
    path.write_text(MINIMAL_STUDY.replace("  name: t\n", f"  name: t\n  output_dir: {folder / 'out'}\n") + extra)
    return path


# ------------------------------------------------------------------ compare: 0 checks is not "no regression"

_arm_keys = st.sampled_from(["G2-b8-t1", "G4-b8-t1", "G8-b16-t0.7"])
_metrics = st.dictionaries(st.sampled_from(["reward_per_hour", "final_reward", "samples_per_second"]),
                           st.none() | st.fixed_dictionaries({"mean": st.none() | st.floats(-10, 10)}), max_size=3)
_summaries = st.lists(st.fixed_dictionaries({"key": _arm_keys, "metrics": _metrics}), max_size=3).map(
    lambda arms: {"arms": arms, "objectives": [{"metric": "reward_per_hour", "direction": "maximize"}]})


@SETTINGS
@given(a=_summaries, b=_summaries, tolerance=st.sampled_from([[], ["final_reward=0.1"], ["samples_per_second=5%"]]))
def test_compare_passes_only_when_it_checked_something(tmp_path_factory, a, b, tolerance):
    import io

    folder = tmp_path_factory.mktemp("cmp")
    (folder / "a.json").write_text(json.dumps(a))
    (folder / "b.json").write_text(json.dumps(b))
    out, err = io.StringIO(), io.StringIO()
    code = compare_main(str(folder / "a.json"), str(folder / "b.json"), tolerance, out=out, err=err)
    assert code in (0, 1, 2)
    if code == 0:
        line = out.getvalue().strip().splitlines()[-1]
        checked = int(line.split(" in ")[1].split()[0])
        assert checked >= 1, out.getvalue()


def test_two_unrelated_studies_are_not_a_pass(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"arms": [{"key": "G2-b8-t1", "metrics": {"final_reward": {"mean": 1.0}}}]}))
    (tmp_path / "b.json").write_text(json.dumps({"arms": [{"key": "G2-b8-t1", "metrics": {"samples_per_second": {"mean": 1.0}}}]}))
    res = cli_inprocess("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--tolerance", "samples_per_second=0.1")
    assert res.returncode == 2 and "nothing was checked" in res.stderr, res


# ------------------------------------------------------------------ G policies with vLLM, at validate


@SETTINGS
@given(policy=st.sampled_from(["dynamic:4", "dynamic:2[3]", "adaptive:8[2-16]", "4->8@50%", "4"]),
       vllm=st.sampled_from(["none", "colocate", "server"]))
def test_a_g_policy_vllm_cannot_run_is_refused_by_validate(tmp_path_factory, policy, vllm):
    folder = tmp_path_factory.mktemp("vllm")
    hardware = "" if vllm == "none" else f"hardware: {{gpus: 2, vllm: {{mode: {vllm}}}}}\n"
    try:
        load_study(_study(folder, hardware), [f"search.num_generations=[{json.dumps(policy)}]",
                                              "study.baseline={}"])
        refused = ""
    except StudyError as e:
        refused = str(e)
    policy_kind = policy.split(":")[0] if ":" in policy else "schedule"
    if vllm != "none" and policy_kind in ("dynamic", "adaptive"):
        assert "not vLLM" in refused, refused
    else:
        assert "not vLLM" not in refused, refused


@SETTINGS
@given(value=st.sampled_from(["dynamic:2[3]", "dynamic:4", "adaptive:8[2-16]", "4->8@50%", "4", "2->8@zero_std<0.3"]))
def test_run_one_takes_a_g_policy_as_the_string_given(tmp_path_factory, value):
    from grpo_ablate.commands.run_one import _split_sets

    folder = tmp_path_factory.mktemp("runone")
    overrides, chosen = _split_sets([f"num_generations={value}"])
    try:
        load_study(_study(folder), overrides)
    except StudyError as e:
        assert "malformed YAML" not in str(e), str(e)  # a feasibility answer is fine; a YAML error about
        # a value the user never wrote is not


# ------------------------------------------------------------------ a raced study's rule


def test_a_raced_study_refuses_a_changed_min_effect_before_any_trial(tmp_path):
    from grpo_ablate.storage.store import open_storage
    from grpo_ablate.study.setup import describe_study, race_rule_changed
    from grpo_ablate.records.trial_record import study_attrs

    sets = ["study.sampler=ablation", "study.racing={}", "study.seeds=[0, 1, 2]", "study.min_effect=0.05"]
    path = _study(tmp_path)
    study = load_study(path, sets)
    ostudy = optuna.create_study(study_name="t", storage=open_storage(study.storage_url), directions=study.directions)
    describe_study(ostudy, study, baseline_arm(study))
    assert race_rule_changed(study_attrs(ostudy), study) is None
    changed = load_study(path, [*sets[:-1], "study.min_effect=0.2"])
    assert "min_effect 0.05 -> 0.2" in (race_rule_changed(study_attrs(ostudy), changed) or "")
    res = cli_inprocess("run", str(path), *[x for s in [*sets[:-1], "study.min_effect=0.2"] for x in ("--set", s)],
                        "--no-report")
    assert res.returncode == 2 and "decision rule" in res.stderr, res
    assert not (study.output_dir / "trials").exists()  # refused before any trial


# ------------------------------------------------------------------ every failure says why


@SETTINGS
@given(outcomes=st.lists(st.tuples(st.sampled_from(["failed", "oom", "pruned", "interrupted", "completed"]),
                                   st.sampled_from(["", " ", "\n", "CUDA error", "reward r returned inf"]),
                                   st.booleans()), min_size=1, max_size=8))
def test_every_failed_line_and_the_last_reasons_say_something(outcomes):
    import contextlib
    import io

    from grpo_ablate.study.console import Counts, StudyConsole
    from grpo_ablate.study.lifecycle import Ended

    counts = Counts()
    console = StudyConsole()
    study = load_study("studies/tiny-cpu.yaml")
    for number, (outcome, reason, fault) in enumerate(outcomes):
        ended = Ended(number, outcome, reason, fault=fault and outcome != "completed")
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            console.console.file = shown
            console.ended(study, ended)
        line = shown.getvalue().strip()
        if outcome != "completed":
            assert "(" in line and line.split("(", 1)[1].strip(") \n"), line
        counts.add(ended)
    for entry in counts.last_reasons:
        assert entry.split(":", 1)[1].strip(), counts.last_reasons


# ------------------------------------------------------------------ prompts the built-in model cannot take


@SETTINGS
@given(chat=st.booleans(), template=st.booleans(), model=st.sampled_from(["builtin:tiny", "builtin:tiny-untrained"]))
def test_chat_prompts_for_the_builtin_model_need_a_template_at_validate(tmp_path_factory, chat, template, model):
    """builtin:tiny is character-level without a chat template: chat-message prompts failed every
    trial ("Cannot use chat template functions") after validate had passed them."""
    folder = tmp_path_factory.mktemp("chat")
    prompt = [{"role": "user", "content": "1+1="}] if chat else "1+1="
    (folder / "data.jsonl").write_text("".join(json.dumps({"prompt": prompt, "answer": "2"}) + "\n" for _ in range(4)))
    data = "data: {dataset: data.jsonl" + (", chat_template: '{% for m in messages %}{{ m.content }}{% endfor %}'"
                                           if template else "") + "}"
    path = _study(folder)
    path.write_text(path.read_text().replace("data: {task: addition}", data).replace("builtin:tiny", model)
                    + "rewards: [length_penalty]\n")
    try:
        load_study(path)
        refused = ""
    except StudyError as e:
        refused = str(e)
    assert ("data.chat_template" in refused) == (chat and not template), refused
