"""No storage password reaches the report: not the page, not summary.json, not the CSVs."""

from __future__ import annotations

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState, create_trial

from _report_fixtures import STUDY_NAME, make_study
from grpo_ablate.report import write_outputs
from grpo_ablate.report.data import build_report_data
from grpo_ablate.report.records import load_trials, masked
from grpo_ablate.records import trial_record as record

PASSWORD = "s3cr3t-Pa55"
URL = f"postgresql://ablate:{PASSWORD}@db.example.org:5432/optuna"


def test_masked_hides_every_password_in_nested_text():
    value = {"study": {"storage": URL, "seeds": [0, 1]},
             "notes": [f"could not connect to {URL}\n(then mysql://u:{PASSWORD}@h/x)", 3.5]}
    out = masked(value)
    assert PASSWORD not in repr(out)
    assert out["study"]["storage"] == "postgresql://ablate:***@db.example.org:5432/optuna"
    assert out["study"]["seeds"] == [0, 1] and out["notes"][1] == 3.5
    assert out["notes"][0].startswith("could not connect to postgresql://ablate:***@db.example.org")


def test_report_of_a_study_on_a_password_url_shows_no_password(tmp_path):
    storage, out = make_study(tmp_path)
    study = optuna.load_study(study_name=STUDY_NAME, storage=JournalStorage(JournalFileBackend(storage)))
    config = dict(record.study_attrs(study).config or {})
    config["study"] = {**config["study"], "storage": URL}  # as `run` stores the study file
    study.set_user_attr(record.CONFIG, config)
    study.add_trial(create_trial(state=TrialState.FAIL, params={}, distributions={}, user_attrs={
        "num_generations": 8, "generation_batch_size": 16, "temperature": 1.0, record.SEED: 3, record.ROLE: "baseline",
        record.OUTCOME: "failed", record.REASON: f"OperationalError: connection to {URL} refused"}))

    attrs, frozen = load_trials(storage, STUDY_NAME)
    assert PASSWORD in repr(attrs) and any(PASSWORD in str(record.stored_attrs(t)) for t in frozen)  # the test is real
    data = build_report_data(STUDY_NAME, attrs, frozen, storage_url=URL)
    paths = write_outputs(data, out / "report.html")

    html = paths["html"].read_text(encoding="utf-8")
    assert PASSWORD not in html
    assert "postgresql://ablate:***@db.example.org:5432/optuna" in html  # still says where the study lives
    assert PASSWORD not in paths["summary_json"].read_text(encoding="utf-8")
    for role in ("trials_csv", "steps_csv", "prompts_csv"):
        assert PASSWORD not in paths[role].read_text(encoding="utf-8"), role
