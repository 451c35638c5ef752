"""The layers of docs/design.md, held by test: every `import hvdbench...` in the package (at module
level or inside a function) is read with `ast`, and each rule names the offending file and line.

    ground floor   errors, output, files, installed, contracts/  (import nothing of hvdbench above them)
    library        data/, topology, launchers/, results/, events, interference, frameworks/, train/,
                   bench/, cluster/, sweep/, study/          (never the CLI, never a model folder)
    models         families/, models/<name>/                (plugins: never another folder, never train/)
    cli            cli/                                     (the top)

Inside the library, topology runs nothing (launchers/ does), frameworks/ never imports train/ (train/
picks a framework), and results/ is rooms by concern, each importing only the rooms below it
(RESULTS_ROOMS). No module of the package imports itself back through others (a circle), at module
level or inside a function.
"""

import ast
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "hvdbench"
GROUND = ("hvdbench.errors", "hvdbench.output", "hvdbench.files", "hvdbench.installed", "hvdbench.contracts")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)  # read once per test process: every rule below asks
def imports() -> tuple[tuple[str, int, str], ...]:
    """(importing module, line, imported hvdbench module) for every import in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from hvdbench.models import x` imports hvdbench.models.x when x is a module
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            found += [(me, node.lineno, n) for n in names if n == "hvdbench" or n.startswith("hvdbench.")]
    return tuple(found)


def under(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def model_folder(name: str) -> str | None:
    """`hvdbench.models.ssd.torch` -> `hvdbench.models.ssd` (None outside the model folders)."""
    parts = name.split(".")
    return ".".join(parts[:3]) if name.startswith("hvdbench.models.") and len(parts) >= 3 else None


@lru_cache(maxsize=None)
def existing(name: str) -> bool:
    """An imported name is a module of the package (not a function imported from one)."""
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def offenders(rule) -> list[str]:
    return [f"{me} (line {line}) imports {target}" for me, line, target in imports()
            if existing(target) and rule(me, target)]


def test_the_ground_floor_imports_nothing_above_it():
    assert offenders(lambda me, t: under(me, *GROUND) and not under(t, *GROUND, "hvdbench")
                     or under(me, *GROUND) and t == "hvdbench.models") == []


def test_library_code_never_imports_the_cli_or_a_model_folder():
    library = ("hvdbench.contracts", "hvdbench.data", "hvdbench.train", "hvdbench.results", "hvdbench.sweep",
               "hvdbench.study", "hvdbench.bench", "hvdbench.cluster", "hvdbench.launchers",
               "hvdbench.frameworks", "hvdbench.topology", "hvdbench.events", "hvdbench.interference",
               "hvdbench.files", "hvdbench.errors", "hvdbench.output")
    assert offenders(lambda me, t: under(me, *library) and under(t, "hvdbench.cli")) == []
    assert offenders(lambda me, t: under(me, *library)
                     and (model_folder(t) or under(t, "hvdbench.families"))) == []


def test_only_the_command_line_modules_import_the_cli():
    # A model folder's cli.py adds `hvdbench prepare` commands with prepare's options.
    def allowed(me):
        return under(me, "hvdbench.cli", "hvdbench.__main__") or (model_folder(me) and me.endswith(".cli"))

    assert offenders(lambda me, t: under(t, "hvdbench.cli") and not allowed(me)) == []


def test_only_the_command_line_imports_click():
    """Library code raises hvdbench's errors (errors.UsageError for options that do not go together,
    which cli/main.py shows as click shows its own), never click's: click is imported by cli/, a model
    folder's cli.py (its prepare commands) and train/options.py (the train command line, parsed once,
    for `train` and for the sweep's arguments after --)."""
    def allowed(me):
        return under(me, "hvdbench.cli") or (model_folder(me) and me.endswith(".cli")) or me == "hvdbench.train.options"

    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            if any(n == "click" or (n or "").startswith("click.") for n in names) and not allowed(me):
                found.append(f"{me} (line {node.lineno}) imports click")
    assert found == []
    assert allowed("hvdbench.cli.sweep") and not allowed("hvdbench.sweep.build")


def test_model_folders_are_plugins():
    # No model folder imports another (shared family code lives in hvdbench/families/), and none
    # imports the trainer: a model's rank and world come from what the trainer hands it.
    assert offenders(lambda me, t: model_folder(me) and model_folder(t)
                     and model_folder(me) != model_folder(t)) == []
    assert offenders(lambda me, t: (model_folder(me) or under(me, "hvdbench.families"))
                     and under(t, "hvdbench.train", "hvdbench.sweep", "hvdbench.study", "hvdbench.results")) == []
    assert offenders(lambda me, t: under(me, "hvdbench.families") and (model_folder(t) or under(t, "hvdbench.cli"))) == []


def test_results_read_what_the_other_layers_wrote_without_importing_them():
    assert offenders(lambda me, t: under(me, "hvdbench.results")
                     and under(t, "hvdbench.sweep", "hvdbench.bench", "hvdbench.train", "hvdbench.study")) == []


# results/ by concern, from the bottom up: a room imports only the rooms on lower floors (export.py and
# analyses/ share a floor: neither imports the other). A new analysis (compute, energy) is a module of
# analyses/; a room of its own is a new line here.
RESULTS_ROOMS = {
    "records": 0,   # what a run is (schema.py: every CSV's columns) and the sweep folder's store
    "mllog": 1,     # published MLPerf logs, read into run records
    "stats": 2,     # grouping and statistics: runs -> the report's rows
    "render": 3,    # tables (CSV, Markdown) and plots, the figure context the analyses share
    "analyses": 4,  # the report's sections: waterfall, ttt, convergence, engines, study and bench tables
    "export": 4,    # our sweeps as an MLPerf results tree
    "predict": 5,   # layouts not run: throughput and time to train
    "report": 6,    # the report as a library: load (the one reader), build (the sections), write (its folder)
    "compare": 7,   # two sweeps or studies side by side (hvdbench compare), read through report's load
    "bundle": 7,    # a sweep's evidence archive with its sha256 manifest (hvdbench bundle)
    "columns": 8,   # docs/columns.md, the dictionary of the report's and compare's tables, from their row classes
}


def results_room(name: str) -> str | None:
    """`hvdbench.results.render.plots` -> "render"; None outside results/ (and for the package itself)."""
    parts = name.split(".")
    return parts[2] if name.startswith("hvdbench.results.") else None


def test_results_rooms_import_one_way_down():
    rooms = {path.stem if path.is_file() else path.name for path in (PACKAGE / "results").iterdir()
             if path.name != "__init__.py" and not path.name.startswith("__")
             and (path.suffix == ".py" or (path / "__init__.py").is_file())}
    assert rooms == set(RESULTS_ROOMS), "a room of results/ without its floor in RESULTS_ROOMS, or one gone"

    def up_or_across(me, target):
        mine, theirs = results_room(me), results_room(target)
        return mine is not None and theirs is not None and mine != theirs \
            and RESULTS_ROOMS[theirs] >= RESULTS_ROOMS[mine]

    assert offenders(up_or_across) == []


def test_topology_runs_nothing_and_frameworks_never_import_train():
    # topology reads hosts and layouts; the runner of `scontrol` is handed in (launchers.guard.capture).
    assert offenders(lambda me, t: me == "hvdbench.topology" and not under(t, *GROUND, "hvdbench.topology")
                     and t != "hvdbench") == []
    # train/ picks the framework's trainer; what both read of the launch (launchers.launch_info) and
    # of the machine (interference) lives below them.
    assert offenders(lambda me, t: under(me, "hvdbench.frameworks") and under(t, "hvdbench.train")) == []
    assert offenders(lambda me, t: under(me, "hvdbench.launchers", "hvdbench.interference")
                     and under(t, "hvdbench.train", "hvdbench.frameworks")) == []


def test_no_circle_of_imports():
    """No module reaches itself through the imports of others, counting imports inside functions: a
    lazy import is for start-up time, never a way around a circle. (A submodule's own package
    __init__ is not counted: Python runs it first by itself.)"""
    graph: dict[str, set[str]] = {}
    for me, _, target in imports():
        if existing(target) and target != me and not me.startswith(target + "."):
            graph.setdefault(me, set()).add(target)
    circles, state = [], {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                circles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_the_rules_see_imports():
    # The checks above pass vacuously if nothing is read: the package has hundreds of imports,
    # among them the ones the rules are about.
    found = imports()
    assert len(found) > 300
    assert any(me == "hvdbench.cli.train" and t == "hvdbench.train.options" for me, _, t in found)
    assert any(model_folder(me) and under(t, "hvdbench.contracts") for me, _, t in found)
    assert any(results_room(me) == "predict" and results_room(t) == "analyses" for me, _, t in found)


def test_test_files_have_unique_basenames():
    """pytest imports test files without packages, by basename: a name in both tests/unit and
    tests/integration stops `make test` (one pytest over both) at collection, though each tier alone
    passes. Found by CI once; held here."""
    tests = PACKAGE.parent / "tests"
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted(tests.rglob("test_*.py")):
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(tests)} and {path.relative_to(tests)}")
        seen.setdefault(path.name, path)
    assert not clashes, "test files share a basename: " + "; ".join(clashes)
