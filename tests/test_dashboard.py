"""`grpo-ablate dashboard` serves a real study; its HTTP API returns what a user sees: the objectives'
metric names, the trials, our user attributes and the artifacts."""

from __future__ import annotations

import html
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import ROOT, cli_env, free_port
from grpo_ablate.plan.cells import baseline_arm
from grpo_ablate.plan.cells import completions_per_trial
from grpo_ablate.config import load_study
from grpo_ablate.storage.store import open_artifact_store
from grpo_ablate.study.artifacts import curve_title, upload_trial_artifacts
from grpo_ablate.core.vocab import HEADLINE_FILE
from grpo_ablate.study.setup import describe_study, open_study
from grpo_ablate.core.vocab import METRICS_FILE, REWARD_CURVE_FILE, Arm, Cell


# Margins, not windows: on a shared 2-core machine the dashboard's start (Python, Optuna, the study
# file) and Chromium's first render take tens of seconds; these waits end as soon as the event comes.
STARTUP_S = 300.0
REQUEST_S = 60.0
BROWSER_MS = 180_000


def _get(url: str):
    with urllib.request.urlopen(url, timeout=REQUEST_S) as r:
        return json.loads(r.read().decode())


def _serve(study_args: list[str]) -> tuple[subprocess.Popen, str]:
    """`grpo-ablate dashboard` on a free port, returned once its HTTP API answers.

    Waits on events with minutes of margin: the process's own banner (printed once the storage is
    open, just before it binds), then the API's first answer. Its output is drained all along and
    shown if it dies; if another process took the port between free_port() and the bind, it exits
    saying "cannot serve on", and it is started again on a new port.
    """
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "dashboard", *study_args, "--port", str(port)],
                                cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        banner = threading.Event()

        def drain(proc=proc, lines=lines, banner=banner) -> None:
            for line in proc.stdout:
                lines.append(line)
                if "optuna-dashboard for study" in line:
                    banner.set()
            banner.set()  # the process ended

        threading.Thread(target=drain, daemon=True).start()
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + STARTUP_S
        banner.wait(STARTUP_S)
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                _get(f"{base}/api/studies")
                return proc, base
            except OSError:
                time.sleep(0.5)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if "cannot serve on" not in "".join(lines):
            raise AssertionError(f"the dashboard never answered on {base}:\n" + "".join(lines)[-4000:])
    raise AssertionError("the dashboard lost its port three times")


def _wait_for_api(base: str) -> dict:
    """The API's study list, once it answers (an in-process server: minutes of margin)."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        try:
            return _get(f"{base}/api/studies")
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"the dashboard never answered on {base}") from None
            time.sleep(0.5)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def test_dashboard_names_objectives_and_shows_headline_metrics(tmp_path):
    """No training: the study is set up by the real code, one trial's files are written by hand."""
    study_args = ["studies/tiny-cpu.yaml", "--set", "study.name=named", "--set", f"study.output_dir={tmp_path / 'named'}",
                  "--set", "study.objectives=[{metric: reward_per_hour}, {metric: peak_memory_mb}]"]
    study = load_study(study_args[0], [a for a in study_args[1:] if a != "--set"])
    ostudy, created = open_study(study, completions_per_trial(study))
    assert created
    describe_study(ostudy, study, baseline_arm(study))
    cell = Cell(Arm(8, 32, 0.9), 1, "baseline")
    trial = ostudy.ask()
    for k, v in cell.as_attrs().items():
        trial.set_user_attr(k, v)
    trial_dir = tmp_path / "trial"
    trial_dir.mkdir()
    rows = [{"step": i, "reward": 0.1 * i, "train_seconds": 2.0 * i, "completions": 32, "peak_memory_mb": 900.0}
            for i in range(1, 6)]
    (trial_dir / METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    upload_trial_artifacts(open_artifact_store(study.output_dir), trial, trial_dir)
    trial.set_user_attr("reward_per_hour", 288.0)
    ostudy.tell(trial, [288.0, 900.0])
    assert curve_title(trial.number, cell) == "trial 0: G=8, batch 32, T=0.9, seed 1 (baseline)"
    assert (trial_dir / REWARD_CURVE_FILE).exists()
    headline = (trial_dir / HEADLINE_FILE).read_text().splitlines()
    assert headline[0] == "metric,label,value,unit,better" and any(r.startswith("reward_per_hour,") for r in headline)

    proc, base = _serve(study_args)
    try:
        studies = _get(f"{base}/api/studies")
        (summary,) = [s for s in studies["study_summaries"] if s["study_name"] == "named"]
        detail = _get(f"{base}/api/studies/{summary['study_id']}?after=0")
        assert detail.get("objective_names") == ["reward_per_hour", "peak_memory_mb"]
        (t,) = detail["trials"]
        names = [a["filename"] for a in t["artifacts"]]
        assert names == [HEADLINE_FILE, METRICS_FILE, REWARD_CURVE_FILE]
        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
        assert attrs["reward_per_hour"] == "288.0" or attrs["reward_per_hour"] == 288.0
        _assert_browser_names_objectives(f"{base}/dashboard/studies/{summary['study_id']}")
    finally:
        _stop(proc)


def _assert_browser_names_objectives(url: str) -> None:
    """What a person sees: the study page, rendered by Chromium, names both objectives."""
    from playwright.sync_api import sync_playwright

    from helpers import unavailable

    if not Path("/usr/bin/chromium").exists():
        unavailable("Debian's chromium is not installed")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"], timeout=BROWSER_MS)
        try:
            page = browser.new_page()
            page.set_default_timeout(BROWSER_MS)
            page.goto(url, timeout=BROWSER_MS)
            page.get_by_text("peak_memory_mb").first.wait_for(timeout=BROWSER_MS)  # the page renders in the browser
            body = page.inner_text("body")
            assert "reward_per_hour" in body and "Objective 0" not in body
        finally:
            browser.close()


@pytest.mark.slow
def test_dashboard_shows_trials_and_user_attrs(finished_study):
    """The shared finished demo study (two real trials), served as a user would serve it."""
    assert finished_study.run.returncode == 0, finished_study.run.stdout + finished_study.run.stderr
    proc, base = _serve(finished_study.args())
    try:
        studies = _get(f"{base}/api/studies")
        (summary,) = [s for s in studies["study_summaries"] if s["study_name"] == finished_study.name]
        detail = _get(f"{base}/api/studies/{summary['study_id']}?after=0")
        assert detail.get("objective_names") == ["eval_final_reward"]  # the demo has held-out evaluation
        trials = detail["trials"]
        assert len(trials) == 2 and {t["state"] for t in trials} == {"Complete"}
        for t in trials:
            attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
            assert attrs["outcome"] == "completed"
            assert {"eval_final_reward", "reward_per_hour", "stability_variance", "samples_per_second",
                    "num_generations"} <= set(attrs)
            assert t["artifacts"], "metrics file and reward curve should be attached"
        # the answer on all three surfaces of a real run: the console, the study's note, the page
        lines = json.loads((finished_study.out / "summary.json").read_text())["verdict"]["lines"]
        assert len(lines) == 3 and "nothing can be excluded from being within 0.05 of the best" in lines[1]  # one seed
        page = html.unescape((finished_study.out / "report.html").read_text())
        assert "Answer:\n" + "".join(f"  {line}\n" for line in lines) in finished_study.run.stdout
        assert all(line in page and f"**{line}**" in detail["note"]["body"] for line in lines)
        with urllib.request.urlopen(f"{base}/dashboard", timeout=REQUEST_S) as r:
            assert r.status == 200
        with urllib.request.urlopen(f"{base}/", timeout=REQUEST_S) as r:  # the address opens on the answer
            assert r.geturl() == f"{base}/dashboard/studies/{summary['study_id']}/note"
    finally:
        _stop(proc)


def test_the_study_note_and_console_carry_the_reports_answer(tmp_path, capsys):
    """The report's answer reaches optuna-dashboard as the study's note, read back through its HTTP API,
    with report.html attached; the console prints the same words; a second report replaces both."""
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna_dashboard import wsgi

    from _report_fixtures import SeedRun, load_custom, make_custom_study
    from grpo_ablate.report import write_outputs
    from grpo_ablate.report.publish import publish_to, say_answer
    from grpo_ablate.report.text import fmt

    base_arm, g2 = Arm(8, 32, 1.0), Arm(2, 32, 1.0)
    arms = {"baseline": (base_arm, {s: SeedRun(eval_curve=(0.2, 0.3 + 0.1 * s)) for s in (0, 1, 2)}),
            "num_generations=2": (g2, {s: SeedRun(eval_curve=(0.2, 0.36 + 0.1 * s)) for s in (0, 1, 2)})}
    storage_path, out = make_custom_study(tmp_path, arms, evaluation={"num_prompts": 4})
    data = load_custom(storage_path)
    paths = write_outputs(data, out / "report.html")
    storage = JournalStorage(JournalFileBackend(storage_path))
    ostudy = optuna.load_study(study_name="custom", storage=storage)
    store = open_artifact_store(out)
    publish_to(ostudy, store, paths)
    publish_to(ostudy, store, paths)  # a second report: still one note version on top, one artifact
    say_answer(paths)
    printed = capsys.readouterr().out
    v = data.verdict
    # the three lines lead, then the details, each said once
    lead = "\n".join(f"  {line}" for line in v.lines)
    assert printed.startswith(f"Answer:\n{lead}\nDetails:\n") and f"Report: {out / 'report.html'}" in printed
    for d in v.details:
        assert printed.count(d) == 1
    assert v.lines[0].startswith("Use num_generations=2, generation_batch_size=32, temperature=1: probability ")
    assert v.lines[0].endswith("of the best held-out reward (a model posterior, not a frequency; 3 seeds per "
                               "configuration); it is clearly better than "
                               "the baseline.")
    # every seed's difference is +0.06, a tie: detectably better, but not shown to be more than 0.05 better
    assert v.lines[1].startswith("As good (not excluded from being within 0.05 of the best, simultaneous 95%): "
                                 "G=8, batch 32, T=1.")
    assert v.lines[2].startswith("Nothing is shown worse")
    assert any("a model posterior, not a frequency: the probability under one model of the seeds" in d for d in v.details)
    page = html.unescape((out / "report.html").read_text())
    assert all(line in page for line in v.lines)
    # the best value shown is the winning arm's mean over its 3 seeds, never one seed's
    best = data.best["eval_final_reward"]
    assert best.stat.n == 3 and f"{best.arm.config.label}: held-out reward {fmt(best.stat.mean)} over 3 seeds" in printed

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):  # noqa: D401 - keep the test output clean
            pass

    from grpo_ablate.commands.dashboard import answer_first, landing_path

    study_id = storage.get_study_id_from_name("custom")
    landing = landing_path(study_id, reported=True)
    assert landing == f"/dashboard/studies/{study_id}/note"
    server = make_server("127.0.0.1", free_port(), answer_first(wsgi(storage, artifact_store=store), landing),
                         handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        (summary,) = [s for s in _wait_for_api(url)["study_summaries"] if s["study_name"] == "custom"]
        detail = _get(f"{url}/api/studies/{summary['study_id']}?after=0")
        with urllib.request.urlopen(f"{url}/", timeout=REQUEST_S) as r:  # the address opens on the answer
            assert r.geturl() == f"{url}{landing}" and b"<html" in r.read().lower()
        note = detail["note"]["body"]
        # the arms as the answer ranks them: means over seeds, best first, with the probability and the call
        table = note[note.index("### Arms: held-out reward, mean over seeds"):note.index("### Details")]
        rows = [r for r in table.splitlines() if r.startswith("| G=")]
        assert len(rows) == 2 and rows[0].startswith("| G=2, batch 32, T=1 |") and "| better (adjusted p" in rows[0]
        assert rows[1].startswith("| G=8, batch 32, T=1 |") and rows[1].endswith("| (the baseline) |")
        assert "| P(within 0.05 of the best), model posterior |" in table
        assert all(f"**{line}**" in note for line in v.lines) and all(d in note for d in v.details)
        assert note.index(f"**{v.lines[2]}**") < note.index(v.details[0])
        assert f"{fmt(best.stat.mean)} over 3 seeds" in note
        (artifact,) = detail["artifacts"]
        assert artifact["filename"] == "report.html"
        with urllib.request.urlopen(f"{url}/artifacts/{summary['study_id']}/{artifact['artifact_id']}", timeout=10) as r:
            assert r.read() == (out / "report.html").read_bytes()
    finally:
        server.shutdown()
        thread.join(timeout=20)


def test_the_banner_points_to_the_answer_not_the_landing_pages_best_trial():
    """Issue 28: the landing page leads with Optuna's one-seed "Best Trial"; the banner says where the answer is."""
    from grpo_ablate.commands.dashboard import banner

    text = banner(load_study(ROOT / "studies/tiny-cpu.yaml"), "127.0.0.1", 8080, "/dashboard/studies/3/note")
    assert "It opens on http://127.0.0.1:8080/dashboard/studies/3/note: the answer" in text
    assert "\"Best Trial\" is one seed's best run" in text


@pytest.mark.slow
def test_the_dashboards_first_screen_in_chromium_is_the_answer(tmp_path):
    """Issue 45: what a person sees on opening the dashboard's address, in a real browser, at a laptop's
    size: the study's Note with the answer's three lines, not the study list or one seed's "Best Trial"."""
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna_dashboard import wsgi

    from _report_fixtures import SeedRun, load_custom, make_custom_study
    from helpers import unavailable
    from grpo_ablate.commands.dashboard import answer_first, landing_path
    from grpo_ablate.report import write_outputs
    from grpo_ablate.report.publish import publish_to

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import dashboard_screenshot  # the manual's picture (docs/dashboard-answer.png) is taken the same way

    if not Path(dashboard_screenshot.CHROMIUM).exists():
        unavailable("Debian's chromium is not installed")
    arms = {"baseline": (Arm(8, 32, 1.0), {s: SeedRun(eval_curve=(0.2, 0.3 + 0.1 * s)) for s in (0, 1, 2)}),
            "num_generations=2": (Arm(2, 32, 1.0), {s: SeedRun(eval_curve=(0.2, 0.36 + 0.1 * s)) for s in (0, 1, 2)})}
    storage_path, out = make_custom_study(tmp_path, arms, evaluation={"num_prompts": 4})
    data = load_custom(storage_path)
    storage = JournalStorage(JournalFileBackend(storage_path))
    store = open_artifact_store(out)
    publish_to(optuna.load_study(study_name="custom", storage=storage), store, write_outputs(data, out / "report.html"))

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):  # noqa: D401 - keep the test output clean
            pass

    landing = landing_path(storage.get_study_id_from_name("custom"), reported=True)
    server = make_server("127.0.0.1", free_port(), answer_first(wsgi(storage, artifact_store=store), landing),
                         handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        _wait_for_api(url)
        seen = dashboard_screenshot.first_screen(f"{url}/", list(data.verdict.lines), tmp_path / "first.png")
        assert seen["url"] == f"{url}{landing}" and seen["shown"] == [True, True, True]
        assert (tmp_path / "first.png").stat().st_size > 10_000
    finally:
        server.shutdown()
        thread.join(timeout=20)
