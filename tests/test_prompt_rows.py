"""Null, blank and broken prompt rows (issue 23, item 7): named by line at validate time and when a
trial loads its data, never trained on as the text "None" nor failed with StopIteration."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from grpo_ablate.commands.cli import main
from grpo_ablate.core.prompt_file import prompt_file_problem
from grpo_ablate.contract.spec import DataSpec


def _lines(path: Path, *rows: str) -> Path:
    path.write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("rows, needles", [
    (['{"prompt": "a"}', '{"prompt": null}'], ["line 2 prompt is null"]),
    (['{"prompt": "a"}', '{"prompt": "   "}', '{"prompt": ""}'], ["2 of 3 rows", "line 2 prompt is blank", "line 3"]),
    (['{"prompt": "a"}', '{"prompt": "b"', '{"prompt": "c"}'], ["line 2 is not valid JSON"]),
    (['{"prompt": "a"}', '', '{"prompt": 3}'], ["line 3 prompt is a int"]),
    (['{"prompt": []}'], ["line 1 prompt is an empty list"]),
    (['{"prompt": [{"role": "user", "content": " "}]}'], ["only blank messages"]),
    (['["a"]'], ["line 1 is a JSON list"]),
    (['{"question": "a"}', '{"question": "b"}'], ["prompt_column 'prompt' is not a column", "no row has it", "question"]),
])
def test_bad_jsonl_rows_are_named_by_line(tmp_path, rows, needles):
    problem = prompt_file_problem(_lines(tmp_path / "d.jsonl", *rows))
    assert problem is not None and str(tmp_path / "d.jsonl") in problem
    for n in needles:
        assert n in problem, problem


def test_an_empty_file_says_it_has_no_rows(tmp_path):
    assert "has no rows" in prompt_file_problem(_lines(tmp_path / "d.jsonl"))
    assert "has no rows" in prompt_file_problem(_lines(tmp_path / "d.jsonl", "", "  "))


def test_many_bad_rows_are_counted_not_all_listed(tmp_path):
    problem = prompt_file_problem(_lines(tmp_path / "d.jsonl", *['{"prompt": null}'] * 40))
    assert "40 of 40 rows" in problem and "(and 35 more)" in problem and len(problem) < 600


def test_good_files_of_every_kind_pass(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert prompt_file_problem(_lines(tmp_path / "d.jsonl", '{"prompt": "a"}', '{"prompt": [{"role": "user", "content": "b"}]}')) is None
    (tmp_path / "d.json").write_text(json.dumps([{"q": "a"}, {"q": "b"}]))
    assert prompt_file_problem(tmp_path / "d.json", "q") is None
    (tmp_path / "d.csv").write_text("prompt,solution\nhi,1\nthere,2\n")
    assert prompt_file_problem(tmp_path / "d.csv") is None
    pq.write_table(pa.table({"prompt": ["a", "b"]}), tmp_path / "d.parquet")
    assert prompt_file_problem(tmp_path / "d.parquet") is None


def test_csv_json_and_parquet_rows_are_checked_too(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "d.csv").write_text("prompt,solution\nhi,1\n,2\n")
    assert "line 3 prompt is blank" in prompt_file_problem(tmp_path / "d.csv")
    (tmp_path / "d.json").write_text(json.dumps([{"prompt": "a"}, {"prompt": None}]))
    assert "row 2 prompt is null" in prompt_file_problem(tmp_path / "d.json")
    pq.write_table(pa.table({"prompt": ["a", None]}), tmp_path / "d.parquet")
    assert "row 2 prompt is null" in prompt_file_problem(tmp_path / "d.parquet")
    (tmp_path / "bad.parquet").write_text("not parquet")
    assert "not a readable parquet file" in prompt_file_problem(tmp_path / "bad.parquet")


def test_max_samples_checks_only_the_rows_used(tmp_path):
    path = _lines(tmp_path / "d.jsonl", '{"prompt": "a"}', '{"prompt": null}')
    assert prompt_file_problem(path, max_rows=1) is None and prompt_file_problem(path) is not None


def test_validate_names_the_bad_rows_in_one_problem(tmp_path, capsys):
    data = _lines(tmp_path / "d.jsonl", '{"prompt": "a"}', '{"prompt": null}', '{"prompt": " "}')
    study = tmp_path / "study.yaml"
    study.write_text(textwrap.dedent(f"""\
        study: {{name: t}}
        model: {{name_or_path: some/model}}
        data: {{dataset: {json.dumps(str(data))}}}
        rewards: [format]
        search: {{num_generations: [2, 4]}}
        budget: {{max_steps: 5}}
        """))
    assert main(["validate", str(study)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "data.dataset: data file" in err and "line 2 prompt is null; line 3 prompt is blank" in err


def test_the_trainer_refuses_bad_rows_with_line_numbers_and_never_trains_on_none(tmp_path):
    """The trial's own data loading (datasets, in the trial process) says the same before training."""
    pytest.importorskip("datasets")
    from datasets import Dataset

    from grpo_ablate.trainer.prompts import _load_source, format_prompts

    bad = _lines(tmp_path / "d.jsonl", '{"prompt": "a"}', '{"prompt": null}')
    with pytest.raises(ValueError, match="line 2 prompt is null"):
        _load_source(DataSpec(dataset=str(bad)))
    with pytest.raises(ValueError, match="has no rows"):
        _load_source(DataSpec(dataset=str(_lines(tmp_path / "e.jsonl"))))
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        _load_source(DataSpec(dataset=str(_lines(tmp_path / "f.jsonl", '{"prompt": "a"}', '{"prompt":'))))
    # a hub dataset is not a local file: its rows are checked as they become prompts
    with pytest.raises(ValueError, match="row 2 of the prompts: prompt is null"):
        format_prompts(Dataset.from_dict({"prompt": ["a", None]}), "prompt", DataSpec(chat_template=False), None)
    with pytest.raises(ValueError, match="row 1 of the prompts: prompt is empty"):
        format_prompts(Dataset.from_dict({"prompt": ["  ", "b"]}), "prompt", DataSpec(chat_template=False), None)
    good = format_prompts(Dataset.from_dict({"prompt": ["a", "b"]}), "prompt", DataSpec(chat_template=False), None)
    assert good["prompt"] == ["a", "b"]
