"""Hostile and mistaken input: every one is refused by `validate` with exit 2 and one short line.

Faults B7 (YAML alias bombs), B8 (malformed `--set`, storage URLs, output paths, study names)
and B9's validate half (a reward module that cannot be found), through the real CLI where the
issue names a command.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from helpers import MINIMAL_STUDY, ROOT, CliResult, cli_inprocess, tmpfs
from helpers import write_study as write  # the one study writer, under this file's short name
from grpo_ablate.config import Problem, StudyError, load_study

STUDY = MINIMAL_STUDY


def refused(res: CliResult, *needles: str) -> str:
    """Exit 2, no traceback, one line on stderr that holds every needle; returns the line."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def alias_bomb(levels: int) -> str:
    """A billion-laughs document: each level a list of nine aliases of the level below."""
    out = ["anchors:", '  - &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        out.append(f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- B7: YAML alias bombs and size


def _limit_memory() -> None:  # a regression fails fast instead of swapping the machine
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def test_nine_level_alias_bomb_is_refused_quickly_in_little_memory(tmp_path):
    path = write(tmp_path, STUDY + alias_bomb(9) + "trainer: {learning_rate: *a9}\n")
    # the child reports its own CPU seconds and peak memory: the work done, whatever else loads the machine.
    # The peak is /proc's VmHWM (this program's, since exec), not ru_maxrss: Linux carries ru_maxrss over
    # exec from the fork, so a child of a large pytest worker reported the worker's size (564 MB, failing)
    code = ("import resource, sys; from grpo_ablate.commands.cli import main; rc = main(['validate', sys.argv[1]]); "
            "u = resource.getrusage(resource.RUSAGE_SELF); "
            "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]; "
            "print(u.ru_utime + u.ru_stime, hwm); sys.exit(rc)")
    res = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, preexec_fn=_limit_memory)
    line = refused(res, "aliases expand to more than")
    assert len(line) < 400
    cpu_seconds, peak_kb = res.stdout.split()[-2:]
    assert float(cpu_seconds) < 15, cpu_seconds  # imports take 1-2 s; expanding the bomb took 65 s
    assert int(peak_kb) < 500_000  # kB of peak memory; was 11 GB
    assert not (tmp_path / "runs").exists()


def test_alias_bomb_in_a_recipe_or_a_set_is_refused(tmp_path):
    (tmp_path / "recipe.yaml").write_text(alias_bomb(9) + "learning_rate: *a9\n")
    with pytest.raises(StudyError, match="trainer_from: .*aliases expand"):
        load_study(write(tmp_path, STUDY + "trainer_from: recipe.yaml\n"))
    bomb_value = "[" + alias_bomb(6).replace("anchors:\n", "").replace("\n  - ", ", ").strip(" -\n") + "]"
    with pytest.raises(StudyError, match="--set: .*aliases expand"):
        load_study(write(tmp_path, STUDY), [f"learning_rate={bomb_value}"])


def test_small_aliases_and_merge_keys_still_work(tmp_path):
    text = ("search: {num_generations: &g [2, 4]}\nstudy: {name: t, seeds: *g}\n"
            "data: {task: addition}\nbudget: {max_steps: 5}\n"
            "trainer:\n  <<: {learning_rate: 1.0e-4, beta: 0.0}\n  seed: 3\n")
    study = load_study(write(tmp_path, text))
    assert study.study.seeds == [2, 4] and study.generations() == [2, 4]
    assert study.trainer == {"learning_rate": 1e-4, "beta": 0.0, "seed": 3}


def test_recursive_alias_is_refused(tmp_path):
    with pytest.raises(StudyError, match="refers to its own anchor"):
        load_study(write(tmp_path, STUDY + "trainer: &t {x: *t}\n"))


def test_file_over_one_megabyte_is_refused_before_parsing(tmp_path):
    path = write(tmp_path, STUDY + "#" + "x" * 1_100_000 + "\n")
    (line,) = (str(p) for p in pytest.raises(StudyError, load_study, path).value.problems)
    assert "larger than 1 MB" in line


def test_echoed_values_are_cut_short(tmp_path):
    # 729 strings under study.name: below the alias limit, far too long to print
    text = alias_bomb(2) + STUDY.replace("  name: t\n", "  name: *a2\n")
    res = cli_inprocess("validate", str(write(tmp_path, text)))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()  # `anchors` is an unknown key too: one line each
    assert any("study.name" in line and "valid string" in line for line in lines), lines
    assert all(len(line) < 400 for line in lines), [len(line) for line in lines]
    long_key = "k" * 5000
    msgs = [str(p) for p in pytest.raises(StudyError, load_study, write(tmp_path, STUDY + f"trainer: {{{long_key}: 1}}\n"),
                                          ["study.output_dir=" + "n" * 5000]).value.problems]
    assert msgs and all(len(m) < 1100 for m in msgs), [len(m) for m in msgs]


def test_problem_text_is_bounded():
    p = Problem(path="x" * 10_000, message="line one\nline two " + "y" * 10_000)
    assert len(str(p)) < 1300 and "\n" not in str(p)


# ---------------------------------------------------------------- B8: malformed --set


@pytest.mark.parametrize("command", ["validate", "plan", "run", "run-one"])
def test_malformed_set_is_one_line_and_exit_2(command, tmp_path):
    res = cli_inprocess(command, "studies/tiny-cpu.yaml", "--set", "num_generations=[2,")
    refused(res, "--set", "num_generations", "malformed YAML")
    assert not (tmp_path / "runs").exists()


def test_set_without_equals_or_key_is_refused(tmp_path):
    path = write(tmp_path, STUDY)
    for item, needle in (("oops", "expected key=value"), ("=3", "expected a dotted key"), ("a..b=1", "dotted key")):
        msgs = [str(p) for p in pytest.raises(StudyError, load_study, path, [item]).value.problems]
        assert any(m.startswith("--set: ") and needle in m for m in msgs), msgs


# ---------------------------------------------------------------- B8: storage URLs


@pytest.mark.parametrize("url,needle", [
    ("postgress://u@localhost/db", "unknown storage scheme 'postgress'"),
    ("postgresql:/x", "is not a database URL"),
    ("sqlte:///study.db", "unknown storage scheme 'sqlte' in 'sqlte:///study.db' (did you mean 'sqlite'?)"),
    ("postgresql://u:secret@localhost:99999/db", "bad port"),
    ("postgresql://u:secret@localhost:abc/db", "bad port"),
    ("mysql://u@localhost/db", "needs the database driver"),
    ("postgresql+nosuchdriver://u@localhost/db", "needs the database driver nosuchdriver"),
])
def test_bad_storage_urls_are_caught_by_validate(url, needle, tmp_path):
    res = cli_inprocess("validate", str(write(tmp_path, STUDY)), "--set", f"study.storage={url}", cwd=tmp_path, PYTHONPATH=str(ROOT))
    line = refused(res, "study.storage", needle)
    assert "secret" not in line  # the password is masked wherever the URL is echoed
    assert list(tmp_path.iterdir()) == [tmp_path / "study.yaml"]  # no journal file named after the typo


def test_good_storage_forms_pass(tmp_path):
    path = write(tmp_path, STUDY)
    for url in (str(tmp_path / "j" / "study.journal"), f"journal:{tmp_path}/a:b.journal", f"sqlite:///{tmp_path}/s.db",
                "postgresql://u:pw@localhost:5432/db"):
        assert load_study(path, [f"study.storage={url}"]).study.storage == url


def test_journal_storage_that_is_a_folder_is_refused(tmp_path):
    msgs = [str(p) for p in pytest.raises(StudyError, load_study, write(tmp_path, STUDY),
                                          [f"study.storage={tmp_path}"]).value.problems]
    assert any("is a folder" in m for m in msgs), msgs


def test_storage_url_is_masked_in_the_saved_config(tmp_path):
    study = load_study(write(tmp_path, STUDY), ["study.storage=postgresql://u:secret@localhost/db"])
    assert study.storage_url == "postgresql://u:secret@localhost/db"  # the real one, to connect
    assert study.to_dict()["study"]["storage"] == "postgresql://u:***@localhost/db"
    res = cli_inprocess("validate", str(tmp_path / "study.yaml"), "--set", "study.storage=postgresql://u:secret@localhost/db")
    assert res.returncode == 0, res.stderr
    assert "u:***@localhost" in res.stdout and "secret" not in res.stdout


# ---------------------------------------------------------------- B8: output paths and study names


def test_output_dir_that_is_a_file_is_caught(tmp_path):
    (tmp_path / "afile").write_text("x")
    path = write(tmp_path, STUDY)
    res = cli_inprocess("validate", str(path), "--set", f"study.output_dir={tmp_path / 'afile'}")
    refused(res, "study.output_dir", "is a file, not a folder")
    res = cli_inprocess("validate", str(path), "--set", f"study.output_dir={tmp_path / 'afile' / 'sub'}")
    refused(res, "study.output_dir", "is a file, so")


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder nobody can write: a real read-only tmpfs as root, else mode 0555."""
    d = tmp_path / "ro"
    if os.geteuid() == 0:  # mode bits do not stop root
        with tmpfs(d, "1m", read_only=True):
            yield d
        return
    d.mkdir()
    d.chmod(0o555)
    try:
        yield d
    finally:
        d.chmod(0o755)


def test_read_only_output_dir_is_caught(read_only_dir, tmp_path):
    res = cli_inprocess("validate", str(write(tmp_path, STUDY)), "--set", f"study.output_dir={read_only_dir / 'out'}")
    refused(res, "study.output_dir", "cannot write in", str(read_only_dir))
    res = cli_inprocess("validate", str(tmp_path / "study.yaml"), "--set", f"study.storage={read_only_dir / 's.journal'}")
    refused(res, "study.storage", "cannot write in")


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "..", "a\\b"])
def test_study_name_cannot_leave_its_folder(name, tmp_path):
    msgs = [str(p) for p in pytest.raises(StudyError, load_study, write(tmp_path, STUDY),
                                          [f"study.name={name!r}"]).value.problems]
    assert any(m.startswith("study.name: must be a plain name") for m in msgs), msgs


def test_study_name_problem_from_the_cli(tmp_path):
    refused(cli_inprocess("validate", str(write(tmp_path, STUDY)), "--set", "study.name=../escape"),
            "study.name", "'../escape'")


# ---------------------------------------------------------------- B9: reward modules


def test_reward_module_not_found_is_caught(tmp_path):
    res = cli_inprocess("validate", str(write(tmp_path, STUDY + "rewards: [no_such_pkg.rewards:score]\n")))
    refused(res, "rewards.0", "module 'no_such_pkg.rewards' not found on the import path", "PYTHONPATH")


def test_reward_module_is_found_without_being_imported(tmp_path):
    """A package whose import leaves a mark: validation finds its module and leaves no mark."""
    pkg = tmp_path / "myrewards"
    pkg.mkdir()
    mark = tmp_path / "imported"
    (pkg / "__init__.py").write_text(f"open({str(mark)!r}, 'w').close()\n")
    (pkg / "score.py").write_text("def f(prompts, completions, **kw):\n    return [0.0] * len(completions)\n")
    path = write(tmp_path, STUDY + "rewards: ['myrewards.score:f', 'myrewards.nope:f']\n")
    res = cli_inprocess("validate", str(path), cwd=tmp_path, PYTHONPATH=str(ROOT))
    refused(res, "rewards.1", "'myrewards.nope'")  # only the missing one
    assert not mark.exists()
    (tmp_path / "study.yaml").write_text(STUDY + "rewards: ['myrewards.score:f']\n")
    ok = cli_inprocess("validate", str(path), cwd=tmp_path, PYTHONPATH=str(ROOT))
    assert ok.returncode == 0, ok.stderr
    assert not mark.exists()


def test_reward_module_in_tests_folder_found_from_repo_root():
    code = ("from grpo_ablate.config.names import module_findable as f; "
            "print(f('tests.helpers_rewards'), f('tests.nope'), f('json'), f('os.path'), f('bad name'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.split() == ["True", "False", "True", "True", "False"], out.stderr


def test_run_refuses_bad_storage_before_anything_runs(tmp_path):
    """`run` validates as `validate` does: a typo or a bad port never reaches Optuna."""
    path = write(tmp_path, STUDY)
    for url, needle in (("postgress://u:secret@localhost/db", "unknown storage scheme"),
                        ("postgresql://u:secret@localhost:abc/db", "bad port")):
        line = refused(cli_inprocess("run", str(path), "--storage", url, cwd=tmp_path, PYTHONPATH=str(ROOT)),
                       "study.storage", needle)
        assert "secret" not in line
    assert list(tmp_path.iterdir()) == [path]


def test_malformed_accelerate_config_is_named(tmp_path):
    (tmp_path / "acc.yaml").write_text("num_processes: [1,\n")
    msgs = [str(p) for p in pytest.raises(StudyError, load_study, write(tmp_path, STUDY + "hardware: {accelerate_config: acc.yaml}\n")).value.problems]
    assert any(m.startswith("hardware.accelerate_config: malformed YAML") for m in msgs), msgs
