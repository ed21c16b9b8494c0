"""A CPU smoke test of one's own dataset and reward: `builtin:tiny` over the dataset's own characters.

    pytest tests/test_builtin_dataset_smoke.py              # the tokenizer over a dataset's characters
    pytest -m slow tests/test_builtin_dataset_smoke.py      # one real trial on a user's .jsonl and reward
"""

from __future__ import annotations

import json
import textwrap

import optuna
import pytest

from grpo_ablate.storage.store import open_storage
from grpo_ablate.trainer.builtin.tokenizer import (VOCAB_CHARS, build_tokenizer, dataset_characters,
                                                  load_builtin_tokenizer, unencodable_prompts)
from grpo_ablate.records import trial_record as record

ROWS = [{"question": "Wie viel ist 3×4? Antworte kurz.", "answer": "12"},
        {"question": "Was ist größer: 7 oder 9?", "answer": "9"}]


def test_the_tokenizer_knows_every_character_of_the_dataset():
    extra = dataset_characters(ROWS)
    assert set(extra) == {"W", "A", "×", "ö", "ß"} and not set(extra) & set(VOCAB_CHARS)
    tok = build_tokenizer(2048, extra)
    for row in ROWS:
        ids = tok(row["question"], add_special_tokens=False).input_ids
        assert tok.unk_token_id not in ids and tok.decode(ids) == row["question"]
    assert dataset_characters([{"prompt": [{"role": "user", "content": "Ä"}]}]) == "Ä"  # chat messages too


EMOJI = [{"prompt": "\U0001f600\U0001f389\U0001f600"}, {"prompt": "\U0001f44d\U0001f3fd\u2764\ufe0f"},
         {"prompt": "a b \u00e9"}]


def _saved_tiny(tmp_path, extra: str):
    """The tokenizer saved beside a qwen2 config.json, as a built-in model's folder holds it."""
    from transformers import Qwen2Config

    folder = tmp_path / "tiny"
    build_tokenizer(2048, extra).save_pretrained(folder)
    Qwen2Config(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
                intermediate_size=16).save_pretrained(folder)
    return folder


def test_emoji_only_prompts_encode_as_the_trial_loads_the_tokenizer(tmp_path):
    """Issue 43: emoji-only prompts ended in an IndexError inside generate: AutoTokenizer maps the folder's
    model type to Qwen2Tokenizer, whose byte-level pre-tokenizer encodes them to nothing (spaces too)."""
    from transformers import AutoTokenizer

    folder = _saved_tiny(tmp_path, dataset_characters(EMOJI))
    prompts = [r["prompt"] for r in EMOJI]
    mapped = AutoTokenizer.from_pretrained(folder)
    assert mapped(prompts[0], add_special_tokens=False).input_ids == []  # what the trial used to get
    tok = load_builtin_tokenizer(folder)
    for p in prompts:
        ids = tok(p, add_special_tokens=False).input_ids
        assert len(ids) == len(p) and tok.decode(ids) == p  # one token per character, spaces included
    assert unencodable_prompts(prompts, tok) == [] and tok.padding_side == "left"


def test_prompts_a_tokenizer_cannot_encode_are_named_by_row(tmp_path):
    tok = load_builtin_tokenizer(_saved_tiny(tmp_path, ""))  # no emoji in its vocabulary
    bad = unencodable_prompts(["12+3=", EMOJI[0]["prompt"], "ok", EMOJI[1]["prompt"]], tok)
    assert [b.split(":")[0] for b in bad] == ["row 2", "row 4"]
    assert "\U0001f600" in bad[0] and "<unk>" in bad[0]


def test_prompts_are_checked_in_batches_with_rows_counted_across_them(tmp_path):
    """Encoded a batch at a time: rows keep their numbers across batches (chat messages skipped, still counted)
    and the limit holds across batches; the answer is the one-prompt-at-a-time answer."""
    tok = load_builtin_tokenizer(_saved_tiny(tmp_path, ""))
    messages = [{"role": "user", "content": EMOJI[0]["prompt"]}]
    prompts = ["1+1=", messages, EMOJI[0]["prompt"], "2+2=", "3+3=", EMOJI[1]["prompt"], EMOJI[0]["prompt"]]
    one_by_one = unencodable_prompts(prompts, tok, batch=1)
    assert [b.split(":")[0] for b in one_by_one] == ["row 3", "row 6", "row 7"]
    for batch in (2, 3, 1024):
        assert unencodable_prompts(prompts, tok, batch=batch) == one_by_one
        assert unencodable_prompts(prompts, tok, limit=2, batch=batch) == one_by_one[:2]


@pytest.mark.slow
def test_own_dataset_and_reward_run_end_to_end_on_cpu(study_here, tmp_path):
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS * 40))
    (tmp_path / "rewards.py").write_text(textwrap.dedent('''\
        def exact(prompts, completions, completion_ids=None, *, answer, **kwargs):
            return [float(c.strip() == a) for c, a in zip(completions, answer)]
        '''))
    study = tmp_path / "study.yaml"
    study.write_text(textwrap.dedent(f"""\
        study: {{name: smoke, output_dir: {tmp_path / 'run'}, sampler: ablation, seeds: [0],
                 baseline: {{num_generations: 2}}}}
        model: {{name_or_path: builtin:tiny}}
        data: {{dataset: data.jsonl, prompt_column: question}}
        rewards: [{{name: 'rewards:exact'}}]
        trainer: {{per_device_train_batch_size: 4, max_completion_length: 8, beta: 0.0}}
        search: {{num_generations: [2], temperature: 1.0}}
        budget: {{max_steps: 2}}
        """))
    res = study_here("run", str(study), "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    (trial,) = optuna.load_study(study_name="smoke", storage=open_storage(str(tmp_path / "run" / "study.journal"))).trials
    assert record.outcome(trial).value == "completed", record.reason(trial)
    rows = [json.loads(x) for x in (tmp_path / "run" / "trials").glob("*/metrics.jsonl").__next__().read_text().splitlines()]
    assert len(rows) == 2 and any("rewards/exact/mean" in r for r in rows)  # the user's reward ran, by its name
