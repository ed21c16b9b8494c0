"""Shared fixtures: real services (PostgreSQL, a SLURM cluster), the suite's warm trial sessions, one finished study.

What a new test should reuse before it starts anything of its own (docs/testing.md has the costs):

    fixture              scope     what it gives                                            where
    warm_session         session   a real WarmSession: each trial a fresh fork of one        fixtures_warm.py
                                   template that did the imports (~1 s a trial, not ~7)
    study_here           function  `grpo-ablate ARGS` in this process, its trials in the      fixtures_warm.py
                                   suite's warm sessions (a study of two workers uses both)
    finished_study       session   studies/tiny-cpu.yaml run once (2 arms, 4 steps, with     conftest.py
                                   its report), shared by every worker: read it, or copy it
    addition_model       session   the built-in addition model built before a test times     conftest.py
                                   a trial's start (a cold cache builds it: minutes)
    postgres_url         session   a private PostgreSQL server on 127.0.0.1                  conftest.py
    fresh_pg_db          function  a new empty database on it                                conftest.py
    slurm_cluster        function  the worker's private single-node SLURM cluster, left      conftest.py, slurm_cluster.py
                                   clean after the test (jobs cancelled, node up)

and the plain helpers (helpers.py): `cli_inprocess` (a command in this process), `run_cli` (in a
process of its own, where the process is the point), `tiny_spec` (a trial spec of the tiny model),
`write_study`, `TRIAL_ENV`, `fail_when_stale` (wait on a heartbeat going stale, never a sleep past
the grace period), `environment_kept` (os.environ back after in-process work inside a test), `tmpfs`,
`fill_disk`, `watchdog`; _report_fixtures.py builds hand-made studies for report tests without training.

A trial forks from the warm template of its startup environment (launch/warm.py `_startup_key`): one
run in this process with another environment (no CUDA_VISIBLE_DEVICES, no thread count, a variable an
in-process build left, PYTHONPATH without tests/) starts a template of its own, ~5 CPU s. Give in-process
runs TRIAL_ENV's variables (study_here does) unless the environment is what the test is about.

Services are real: the PostgreSQL fixture runs Debian's initdb/pg_ctl into a temp dir (as the
`postgres` user when the tests run as root, since initdb refuses root). Where a service cannot
be had, the test is skipped with the reason, except under CI (CI=true), where it fails: CI must
never pass by skipping what it was meant to run.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

# The plain helpers are defined once, in helpers.py; tests import them from there.
from helpers import TESTS, FinishedStudy, cli_inprocess, environment_kept, free_port, unavailable
from slurm_cluster import SlurmCluster, missing_binaries
from grpo_ablate.launch.devices import claim_cpu_share
from grpo_ablate.launch import LauncherPool, lend_launchers

pytest_plugins = ["fixtures_warm"]  # the session-scoped `warm_session` (one warm trial process)

# `make test` runs two pytest workers (pytest-xdist). Each gets its own cache folder, so its CPU
# slots are its own: a test that counts the threads a trial gets never sees the other worker's
# trials. Each worker holds one slot there for every other worker, for the whole run, so a
# worker's trial takes cores / workers threads, as the trials of two `grpo-ablate run`s on one
# host do. Without it each worker's trials took every core, and two trials' OpenMP threads (two
# each on two cores) spun against each other (README, "Test markers": the figures).
# The built-in models are shared (each worker's folder links to one): a fresh machine builds
# each once, not once per worker (the build's file lock makes the other worker wait; building
# both at once took ~300 s each; alone, 40 of its 400 steps take 3.4 s).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    _cache_base = os.path.join(os.path.expanduser("~"), ".cache")
    os.environ["GRPO_ABLATE_CACHE"] = os.path.join(_cache_base, f"grpo-ablate-tests-{_WORKER}")
    _shared_models = Path(_cache_base, "grpo-ablate-tests", "models")
    _shared_models.mkdir(parents=True, exist_ok=True)
    _models = Path(os.environ["GRPO_ABLATE_CACHE"], "models")
    if not _models.is_symlink():
        _models.parent.mkdir(parents=True, exist_ok=True)
        if _models.exists():  # a worker's own models from before this layout: keep what it built
            for built in _models.iterdir():
                if not (_shared_models / built.name).exists():
                    os.replace(built, _shared_models / built.name)
            shutil.rmtree(_models)
        try:
            _models.symlink_to(_shared_models, target_is_directory=True)
        except FileExistsError:
            pass
    _OTHER_WORKERS = [claim_cpu_share(1) for _ in range(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) - 1)]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("GRPO_ABLATE_VALIDATE", "quick")  # the file checks only; test_validate_trial_start.py runs the rest


def _pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """os.environ back, after each test, to what it was before the test and its fixtures' setup.

    monkeypatch undoes what a test sets; code a test or a fixture runs in this process sets
    variables of its own and never takes them back (a trial run in-process by worker.run_spec sets
    ACCELERATE_MIXED_PRECISION, torch's inductor TORCHINDUCTOR_CACHE_DIR). A trial's environment
    is this process's, so one leaked variable gave every later trial a new startup environment,
    and with it a warm-session template of its own (about 5-10 s of imports each): 4 of the 11
    templates the two workers started in one run. Restored here (module and session fixtures set
    up inside a test's protocol included; none of them means to set the environment), a test sees
    the environment it would see alone."""
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture(scope="session")
def addition_model():
    """The built-in model warm-started on addition (the suite's default), built before a test times a trial.

    On a fresh machine its first use builds it: a 400-step warm start, 5-6 minutes on two busy cores
    (measured in a fresh-clone CI run). A test whose deadline is for a trial's imports and first step
    would count that build too and fail on a cold cache only; it asks for this fixture instead, so the
    build happens in its set-up, untimed. Cached (shared by the workers, under a file lock): instant after.
    """
    from grpo_ablate.trainer.builtin.model import builtin_model_path

    with environment_kept():  # a build here sets torch's variables: the test's trials keep the warm session's key
        return builtin_model_path("builtin:tiny", "addition", log=lambda _: None)


class PostgresServer:
    """A private PostgreSQL server (Debian's initdb/pg_ctl into a temp dir, on loopback); stop() and start() it to
    make an outage (the data, the port and the URL stay)."""

    def __init__(self) -> None:
        initdb, self.pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        if not initdb or not self.pg_ctl:
            unavailable("PostgreSQL server binaries (Debian package postgresql) are not installed")
        self.base = Path(tempfile.mkdtemp(prefix="grpo-pg-"))
        self.data = self.base / "data"
        self.port = free_port()
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres", "postgres")
            os.chmod(self.base, 0o700)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        subprocess.run(self.prefix + [initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync"],
                       check=True, capture_output=True)
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.start()

    def start(self) -> None:
        subprocess.run(self.prefix + [str(self.pg_ctl), "-D", str(self.data), "-l", str(self.base / "log.txt"), "-w", "-o",
                                      f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.base} -c fsync=off "
                                      "-c max_connections=200", "start"], check=True, capture_output=True)

    def stop(self, mode: str = "fast") -> None:
        """`fast`: every connection is cut, as when a database server is restarted."""
        subprocess.run(self.prefix + [str(self.pg_ctl), "-D", str(self.data), "-m", mode, "-w", "stop"], capture_output=True)

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    """The worker's throwaway PostgreSQL server, for the tests that stop and start it (an outage)."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def postgres_url(postgres_server):
    """A throwaway PostgreSQL server on 127.0.0.1; yields a URL with a fresh database."""
    yield postgres_server.url


@pytest.fixture
def slurm_cluster(slurm_cluster_session):
    """The worker's SLURM cluster, left clean after the test (jobs cancelled, their processes gone, the node up)."""
    yield slurm_cluster_session
    slurm_cluster_session.reset()


@pytest.fixture(scope="session")
def slurm_cluster_session():
    """A private single-node SLURM cluster (tests/slurm_cluster.py), one per pytest worker; stopped by pid at the end."""
    missing = missing_binaries()
    if missing:
        unavailable(f"SLURM and munge (Debian packages slurm-wlm, munge) are not installed: no {', '.join(missing)}")
    base = Path(tempfile.mkdtemp(prefix="grpo-slurm-"))
    try:
        with SlurmCluster.start(base, name=f"ga{os.environ.get('PYTEST_XDIST_WORKER', 'main')}") as cluster:
            yield cluster
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def fresh_pg_db(postgres_url):
    """A new empty database per test, so studies never collide."""
    import psycopg

    name = f"t{int(time.time() * 1000) % 10**9}_{os.getpid()}"
    with psycopg.connect(postgres_url.replace("postgresql://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def finished_study(tmp_path_factory, warm_session) -> FinishedStudy:
    """The demo (studies/tiny-cpu.yaml) run once, with its report, through the CLI in this process
    (its trials in the suite's warm session: fixtures_warm.study_here).

    Two arms, seed 0, 4 optimizer steps, one worker, temperature 1.0: the baseline at a fixed
    G=8 and a G schedule 2->8 at half the budget. Shared by the tests that only read a finished
    study (its records and resume, the dashboard, a schedule arm in the report), so those two real
    trials start once per session instead of once per test. Readers must not write to it: a test
    that reruns it works on a copy.
    """
    study_args = ("studies/tiny-cpu.yaml", "--set", "study.name=shared", "--set", "budget.max_steps=4",
                  "--set", "study.seeds=[0]", "--set", "study.workers=1", "--set", "temperature=1.0",
                  "--set", 'num_generations=[8, "2->8@50%"]', "--set", "study.baseline={num_generations: 8}")
    # One run for the whole test run: under xdist the workers share their parent temp folder, and the
    # first to get there runs the study while the other waits on the lock, then reads its result.
    root = tmp_path_factory.getbasetemp()
    root = root.parent if _WORKER else root
    out, ran = root / "finished" / "shared", root / "finished" / "run.json"
    with open(root / "finished.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not ran.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            args = ["run", *study_args, "--set", f"study.output_dir={out}"]
            with lend_launchers(LauncherPool(launchers={"warm": warm_session})):  # as fixtures_warm.study_here
                res = cli_inprocess(*args, PYTHONPATH=str(TESTS))
            ran.write_text(json.dumps({"args": args, "returncode": res.returncode, "stdout": res.stdout,
                                       "stderr": res.stderr}))
    saved = json.loads(ran.read_text())
    res = subprocess.CompletedProcess(saved["args"], saved["returncode"], saved["stdout"], saved["stderr"])
    return FinishedStudy(name="shared", out=out, study_args=study_args, run=res)


# Seconds each test file took in a recorded `make test` run (`make durations` rewrites it): the
# order files are handed out in. A file not recorded yet counts its slow tests at ~10 s each.
DURATIONS = Path(__file__).with_name("durations.json")
_SLOW_TEST_SECONDS = 10.0


def pytest_addoption(parser):
    parser.addoption("--write-durations", metavar="PATH", default=None,
                     help="write each test file's seconds (setup, call and teardown summed) to PATH as JSON")


def pytest_collection_modifyitems(config, items):
    """The longest files first, by the recorded durations: `make test`'s two workers take a file at a
    time (`--dist loadfile --no-loadscope-reorder`), so a long file handed out last would leave one
    worker alone at the end (longest-first keeps the two within about the last file's length).
    Order within a file is kept."""
    try:
        recorded = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        recorded = {}
    estimate: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        name = item.path.name
        first.setdefault(name, i)
        if name not in recorded:
            estimate[name] = estimate.get(name, 0.0) + (_SLOW_TEST_SECONDS if item.get_closest_marker("slow") else 0.1)
    seconds = {**estimate, **{k: float(v) for k, v in recorded.items()}}
    items.sort(key=lambda item: (-seconds.get(item.path.name, 0.0), first[item.path.name]))


_file_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Sums each file's seconds (under xdist the controller gets every worker's reports)."""
    name = report.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    _file_seconds[name] = _file_seconds.get(name, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--write-durations")
    if path and not hasattr(session.config, "workerinput") and _file_seconds:
        Path(path).write_text(json.dumps({k: round(v, 1) for k, v in sorted(_file_seconds.items())}, indent=0) + "\n")
