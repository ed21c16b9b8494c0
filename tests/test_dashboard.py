"""`grpo-ablate dashboard` serves a real finished study; its HTTP API returns the trials and our user attributes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ROOT, cli_env, free_port, run_cli

pytestmark = pytest.mark.slow


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read().decode())


def test_dashboard_shows_trials_and_user_attrs(tmp_path):
    study_args = ["studies/tiny-cpu.yaml", "--set", "study.name=dash", "--set", f"study.output_dir={tmp_path / 'dash'}",
                  "--set", "budget.max_steps=3", "--set", "study.seeds=[0]", "--set", "num_generations=[2, 4]",
                  "--set", "study.baseline={num_generations: 2}", "--set", "study.workers=1"]
    res = run_cli("run", *study_args, "--no-report")
    assert res.returncode == 0, res.stdout + res.stderr
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "grpo_ablate", "dashboard", *study_args, "--port", str(port)],
                            cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        studies = None
        for _ in range(60):
            try:
                studies = _get(f"{base}/api/studies")
                break
            except OSError:
                time.sleep(0.5)
        assert studies is not None, "the dashboard never answered"
        (summary,) = [s for s in studies["study_summaries"] if s["study_name"] == "dash"]
        detail = _get(f"{base}/api/studies/{summary['study_id']}?after=0")
        trials = detail["trials"]
        assert len(trials) == 2 and {t["state"] for t in trials} == {"Complete"}
        for t in trials:
            attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
            assert attrs["outcome"] == "completed"
            assert {"reward_per_hour", "stability_variance", "samples_per_second", "num_generations"} <= set(attrs)
            assert t["artifacts"], "metrics file and reward curve should be attached"
        with urllib.request.urlopen(f"{base}/dashboard", timeout=10) as r:
            assert r.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
