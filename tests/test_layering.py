"""Dependencies point one way: no import circle among the package's modules, and every package
imports only from its own floor or the floors below (the manual's architecture page, "Floors").

Read from the source with `ast`, so the test imports nothing. Every import counts, also one
inside a function (a deferred import hides a circle from Python, not from a reader), except
those under `if TYPE_CHECKING:`. Importing `a.b.c` runs `a.b`'s `__init__` too, so a module
depends on each package above what it imports; the root package's `__init__` (the public API,
which every submodule import runs) is left out, or every module would be in one circle with it.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "grpo_ablate"

# The floors, ground up: a package imports only from its own floor or below,
# and packages on one floor import each other in one direction only (no package circle).
FLOORS: list[set[str]] = [
    {"core"},  # words and small pure rules: vocab, errors, bounds, schedule, space, cost, safe reads, precision and attention
    {"trl_facts"},  # facts about TRL itself: GRPOConfig's fields and defaults in the installed TRL
    {"stats"},  # statistics: paired tests, intervals, sequential decisions
    {"storage"},  # where a study lives: Optuna storages, their URLs, the journal's lines
    {"contract"},  # what crosses parent to child: the trial spec and its sections, the result, env names and flags, trial files
    {"files", "records"},  # the records: files read back; what a trial and a race leave in their study; metrics; what trials spent
    {"config"},  # the study file
    {"plan"},  # the study's plan from its file: what a trial costs, cells, branch point, price, design, the run plan (pure, no Optuna)
    {"trainer"},  # one trial: the child side (the trial process, its trainer, callbacks, checkpoints)
    {"launch"},  # the parent side of a trial: launchers and their registry, the vLLM server, device placement
    {"study"},  # the Optuna study: its search (encoding, samplers, pruning), ledger, lifecycle, runner, warm start
    {"preflight"},  # probe and advise, before any full trial
    {"report"},  # reads records, never runs trials
    {"commands", "__main__"},  # every `grpo-ablate` subcommand
]

# Upward imports another change is removing (a module edge each). The test fails when one is gone,
# so the list only shrinks; an entry names who removes it.
PENDING: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def _targets(name: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    return [base, *(f"{base}.{a.name}" for a in node.names)]


def import_graph() -> dict[str, set[str]]:
    """Each module's package-internal imports: a fresh copy of the one parse of the source (a test may change it)."""
    return {name: set(deps) for name, deps in _parsed_graph().items()}


@lru_cache(maxsize=1)
def _parsed_graph() -> dict[str, frozenset[str]]:
    """The source parsed once per process: every test here reads the same graph (0.8 s of CPU a parse)."""
    modules = _modules()
    graph: dict[str, frozenset[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_nodes(tree)
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in _targets(name, path, node):
                parts = target.split(".")
                for i in range(2, len(parts) + 1):  # the packages above it run first
                    dep = ".".join(parts[:i])
                    if dep in modules and dep != name and not name.startswith(dep + "."):
                        deps.add(dep)
        graph[name] = frozenset(deps)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_package() -> None:
    graph = import_graph()
    assert "grpo_ablate.core.errors" in graph and "grpo_ablate.config.places" in graph  # the walk found the package
    assert cycles(graph) == []


def test_the_bottom_layer_imports_nothing_of_the_package() -> None:
    graph = import_graph()
    assert graph["grpo_ablate.core.errors"] == set()
    assert "grpo_ablate.config" not in graph["grpo_ablate.storage.store"]



def test_config_and_plan_do_not_reach_into_preflight() -> None:
    graph = import_graph()
    for name in (m for m in graph if m.startswith(("grpo_ablate.plan", "grpo_ablate.config"))):
        assert not any(d.startswith("grpo_ablate.preflight") for d in graph[name]), (name, graph[name])


def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module that importing the modules under `start` runs (deferred imports included), those excluded."""
    seen: set[str] = set()
    todo = [m for m in graph if m == start or m.startswith(start + ".")]
    while todo:
        for d in graph.get(todo.pop(), ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return {m for m in seen if not (m == start or m.startswith(start + "."))}


def test_report_imports_no_study_or_launch_module() -> None:
    """Records apart from policy (issue 54): writing a report reads the study's records (trial_record,
    race_record, the files) and its plan (plan/), never the study's policies, its ledger or a launcher, directly
    or through anything it imports."""
    graph = import_graph()
    assert "grpo_ablate.report.data" in graph
    banned = {m for m in reached(graph, "grpo_ablate.report")
              if m.startswith(("grpo_ablate.study", "grpo_ablate.launch"))}
    assert banned == set(), f"report/ reaches these study/launch modules: {sorted(banned)}"


# Above the child: the study file and everything the orchestrator builds from it. A trial reads its spec, TRL's facts
# (trl_facts/) and the low-floor rules (precision, attention, cost, schedule), never the study file's schema or a policy.
ABOVE_THE_CHILD = ("config", "plan", "launch", "study", "preflight", "report", "commands", "__main__")


def test_the_child_imports_nothing_from_config_or_the_orchestrator() -> None:
    """The child (trainer/, the trial process) imports nothing from config/, the plan, launch/, study/, preflight/,
    report/ or commands/ (issue 54 item 3), directly or through anything it imports, deferred imports included:
    what crosses from the parent comes in spec.json, and what both sides need lives on a floor below both."""
    graph = import_graph()
    assert "grpo_ablate.trainer.build" in graph and "grpo_ablate.trainer.worker" in graph
    banned = {m for m in reached(graph, "grpo_ablate.trainer") | _root_reach(graph) if _package(m) in ABOVE_THE_CHILD}
    assert banned == set(), f"trainer/ reaches these modules above the child: {sorted(banned)}"


def _root_reach(graph: dict[str, set[str]]) -> set[str]:
    """What the package's own `__init__` (the public API) imports, and all those import: every `import
    grpo_ablate.<x>` runs it first, the trial's included, so it loads the study file's code only on first use."""
    seen: set[str] = set()
    todo = list(graph[PACKAGE])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += graph.get(m, ())
    return seen


def test_the_reach_check_finds_a_module_two_imports_away() -> None:
    graph = {"grpo_ablate.report.data": {"grpo_ablate.plan.price"}, "grpo_ablate.plan.price": {"grpo_ablate.study.racing"},
             "grpo_ablate.study.racing": {"grpo_ablate.launch.registry"}, "grpo_ablate.launch.registry": set()}
    assert reached(graph, "grpo_ablate.report") == {"grpo_ablate.plan.price", "grpo_ablate.study.racing",
                                                     "grpo_ablate.launch.registry"}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _floor_of() -> dict[str, int]:
    return {name: i for i, floor in enumerate(FLOORS) for name in floor}


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(module, dependency) pairs where the dependency's package sits on a higher floor."""
    floor = _floor_of()
    return {(m, d) for m, deps in graph.items() for d in deps
            if _package(m) and _package(d) and floor[_package(d)] > floor[_package(m)]}


def test_every_package_has_a_floor() -> None:
    packages = {_package(m) for m in import_graph()} - {""}
    assert packages <= set(_floor_of()), f"place these on a floor in FLOORS: {sorted(packages - set(_floor_of()))}"


def test_no_package_imports_from_a_floor_above() -> None:
    up = upward_imports(import_graph())
    assert up - PENDING == set(), "imports that run up a floor (move the code, not the import into a function)"
    assert PENDING - up == set(), "these upward imports are gone: remove them from PENDING"


def test_no_import_circle_between_packages() -> None:
    graph = import_graph()
    packages: dict[str, set[str]] = {}
    for m, deps in graph.items():
        if not _package(m):
            continue
        packages.setdefault(_package(m), set()).update(
            _package(d) for d in deps if _package(d) and _package(d) != _package(m) and (m, d) not in PENDING)
    assert cycles(packages) == []


def test_the_floor_check_finds_an_upward_import() -> None:
    graph = {"grpo_ablate.core.vocab": {"grpo_ablate.report.data"}, "grpo_ablate.report.data": {"grpo_ablate.core.vocab"}}
    assert upward_imports(graph) == {("grpo_ablate.core.vocab", "grpo_ablate.report.data")}


def test_the_child_imports_nothing_above_the_contract() -> None:
    """The child (trainer/) reaches only the contract (contract/: spec, result, env names, trial files) and the
    floors below it, deferred imports included (issue 54 item 3): everything it learns from the parent crosses in
    the contract, so nothing of the records, the study file, the plan or the orchestrator is on its path."""
    graph = import_graph()
    floor = _floor_of()
    top = floor["contract"]
    reach = reached(graph, "grpo_ablate.trainer") | _root_reach(graph)
    above = {m for m in reach if _package(m) and _package(m) != "trainer" and floor[_package(m)] > top}
    assert above == set(), f"trainer/ reaches these modules above the contract: {sorted(above)}"


def test_the_contract_imports_no_side_of_the_boundary() -> None:
    """The contract owns what crosses parent to child, so neither side's code is on its path: nothing from trainer/
    (the child), launch/, study/, preflight/ (the parent) or config/ (the study file), deferred imports included."""
    graph = import_graph()
    assert "grpo_ablate.contract.spec" in graph
    sides = ("trainer", "launch", "study", "preflight", "config", "plan", "commands")
    banned = {m for m in reached(graph, "grpo_ablate.contract") if _package(m) in sides}
    assert banned == set(), f"contract/ reaches these modules: {sorted(banned)}"


def test_no_module_outside_the_child_imports_it() -> None:
    """The child (trainer/) runs as a process, never as a library: what both sides use (environment variables,
    flags, log prefixes, trial-file readers, the checkpoint format and cadence, a command trial's command line)
    lives in contract/, so no parent module (launch/, preflight/, study/, report/, commands/ and the floors
    below) imports trainer/ for a constant or a helper, and what runs the trial's own build (the dry run,
    validate's trial check, advise's sampler) is a child module started as a process (issue 54 item 3)."""
    graph = import_graph()
    parents = [m for m in graph if _package(m) != "trainer"]
    assert any(m.startswith("grpo_ablate.study") for m in parents) and any(m.startswith("grpo_ablate.launch") for m in parents)
    direct = {m for m in parents if any(_package(d) == "trainer" for d in graph[m])}
    assert direct == set(), f"these import trainer/ directly: {sorted(direct)}"


def test_no_loose_modules_beside_the_packages():
    """Every module lives in a package named for its floor (issue 54 item 6): the package root holds only its
    public API (`__init__`) and the `python -m grpo_ablate` entry point, so the folder names show the architecture."""
    loose = sorted(p.name for p in (ROOT / PACKAGE).glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"], loose
    assert {_package(m) for m in import_graph()} - {""} <= set().union(*FLOORS), "a package without a floor"
