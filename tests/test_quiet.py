"""Quiet where nothing is wrong, loud where something is (issue 53 item 5): no price line for a study that tunes no
particular run, the recipe's TRL field lists as one line each unless `plan --verbose`, and `validate` naming each
value of G it drops."""

from __future__ import annotations

import json

import pytest

from grpo_ablate.config import load_study
from grpo_ablate.config.recipes import FieldList
from grpo_ablate.plan.price import tunes_a_run
from helpers import ROOT, TINY_CPU, cli_inprocess

OPEN_R1 = ROOT / "studies" / "openr1-1.5b-numina-8gpu.yaml"


def test_only_a_study_that_names_its_run_has_a_price_in_units_of_it():
    assert not tunes_a_run(load_study(TINY_CPU))
    assert tunes_a_run(load_study(OPEN_R1))  # its trainer_from recipe sets budget.full_run
    assert tunes_a_run(load_study(TINY_CPU, ["budget.full_run.max_steps=500"]))


@pytest.mark.slow  # the suite's one finished demo study (conftest), shared with the other files that read it
def test_the_demo_run_starts_without_a_price_line(finished_study):
    """The demo's first console line used to be "Price: ... unknown: no full run to compare with"."""
    first = finished_study.run.stdout.splitlines()[0]
    assert not first.startswith("Price:") and "Price:" not in finished_study.run.stdout
    page = (finished_study.out / "report.html").read_text(encoding="utf-8")
    assert "in units of your run" not in page


def test_plan_says_each_trl_field_list_in_one_line_and_verbose_lists_them():
    short = cli_inprocess("plan", str(OPEN_R1))
    assert short.returncode == 0, short.stderr
    notes = [line for line in short.stdout.splitlines() if "TRL 0.18.0" in line and "fields" in line]
    assert len(notes) == 2 and all(len(n) < 300 and "`grpo-ablate plan --verbose` lists them" in n for n in notes), notes
    assert "activation_checkpointing (None)" not in short.stdout
    verbose = cli_inprocess("plan", str(OPEN_R1), "--verbose")
    assert verbose.returncode == 0 and "activation_checkpointing (None)" in verbose.stdout and "adafactor (False)" in verbose.stdout
    listed = [w for w in load_study(OPEN_R1).warnings if isinstance(w, FieldList)]
    assert len(listed) == 2 and all(len(w) > 1000 for w in listed)  # the whole list stays in the note itself
    assert all(str(w) in json.loads(cli_inprocess("plan", str(OPEN_R1), "--json").stdout)["differences"] for w in listed)
    checked = cli_inprocess("validate", "--quick", str(OPEN_R1))
    assert checked.returncode == 0 and "adafactor (False)" not in checked.stderr and "--verbose" in checked.stderr


def test_validate_names_each_g_it_drops_and_why():
    res = cli_inprocess("validate", "--quick", str(TINY_CPU), "--set", "num_generations=[2, 8, 12]")
    assert res.returncode == 0, res.stderr
    assert ("warning: search.num_generations 12 is dropped: the default generation batch 32 is not divisible by "
            "num_generations 12") in res.stderr
    assert "num_generations 2 is" not in res.stderr and "num_generations 8 is" not in res.stderr
    kept = cli_inprocess("validate", "--quick", str(TINY_CPU), "--set", "num_generations=[2, 8, 12]",
                         "--set", "search.generation_batch_size=auto")
    assert kept.returncode == 0 and "dropped" not in kept.stderr  # 12 fits a batch of its own there
    clean = cli_inprocess("validate", "--quick", str(TINY_CPU))
    assert clean.returncode == 0 and clean.stderr == ""
