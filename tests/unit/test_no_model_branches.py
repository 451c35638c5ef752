"""The core has no per-model or per-kind branches: outside `hvdbench/models/<name>/` and
`hvdbench/frameworks/`, no module compares a value with a model's name, its MLPerf benchmark
name or a dataset kind's name, nor keeps a table keyed by model names. (The registry,
`hvdbench/models/__init__.py`, is the one place that lists them.)"""

import ast
from pathlib import Path

from hvdbench.contracts import kind_names, model_names, specs

PACKAGE = Path(__file__).resolve().parents[2] / "hvdbench"
ALLOWED = ("models/__init__.py",)


def names() -> set[str]:
    return {*model_names(), *kind_names(), *(s.benchmark for s in specs())}


def core_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        in_model_folder = rel.startswith("models/") and rel.count("/") >= 2
        if in_model_folder or rel.startswith("frameworks/") or rel in ALLOWED:
            continue
        yield rel, ast.parse(path.read_text(), filename=str(path))


def constants(node) -> list[str]:
    """String constants of a comparison operand (a literal, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in constants(elt)]
    return []


def branches(tree, watched: set[str]) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                found += [(node.lineno, s) for s in constants(operand) if s in watched]
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if sum(k in watched for k in keys) >= 2:  # a per-model table
                found.append((node.lineno, ", ".join(k for k in keys if k in watched)))
        elif isinstance(node, ast.match_case):
            found += [(node.pattern.lineno, s) for s in constants(getattr(node.pattern, "value", None))
                      if s in watched]
    return found


def test_no_core_module_branches_on_a_model_or_kind():
    watched = names()
    assert {"resnet50", "bert", "images", "bert_packed", "resnet"} <= watched
    offenders = [f"hvdbench/{rel}:{line}: {name!r}" for rel, tree in core_modules()
                 for line, name in branches(tree, watched)]
    assert offenders == []


def test_the_check_finds_a_branch():
    """The check itself: each shape of branch it looks for is found."""
    watched = {"resnet50", "images"}
    code = ("if kind == 'images': pass\n"
            "x = model in ('resnet50', 'vgg')\n"
            "T = {'resnet50': 1, 'images': 2}\n"
            "match m:\n    case 'resnet50': pass\n")
    assert [line for line, _ in branches(ast.parse(code), watched)] == [1, 2, 3, 5]
    assert branches(ast.parse("batch = {'images': x, 'labels': y}"), watched) == []


# --- engines (issue 54): a descriptor per engine, asked, never its name compared -----------------

ENGINE_REGISTRY = "contracts/engines.py"


def engine_comparisons(tree) -> list[tuple[int, str]]:
    """Comparisons of an engine-named value (a name or attribute with "engine" in it) with a built-in
    engine's name, and tables keyed by two or more of them."""
    from hvdbench.contracts.engines import BUILT_IN

    watched = {e.name for e in BUILT_IN}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            about_engines = any("engine" in ast.unparse(x).lower() for x in operands if not constants(x))
            found += [(node.lineno, s) for x in operands for s in constants(x) if s in watched and about_engines]
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if sum(k in watched for k in keys) >= 2:
                found.append((node.lineno, ", ".join(k for k in keys if k in watched)))
    return found


def test_no_module_compares_an_engines_name():
    """Outside the engine registry, code asks an engine's descriptor (shards_state, needs_horovod, ...)
    and never compares its name; model folders and frameworks/ included."""
    offenders = [f"hvdbench/{path.relative_to(PACKAGE).as_posix()}:{line}: {name!r}"
                 for path in sorted(PACKAGE.rglob("*.py")) if path.relative_to(PACKAGE).as_posix() != ENGINE_REGISTRY
                 for line, name in engine_comparisons(ast.parse(path.read_text()))]
    assert offenders == []


def test_the_engine_check_finds_a_comparison():
    code = ("if cfg.engine == 'fsdp': pass\n"
            "x = engine not in ('horovod',)\n"
            "T = {'ddp': 1, 'fsdp': 2}\n"
            "y = r.impl == 'horovod'\n")  # an allreduce implementation's name, not an engine's
    assert [line for line, _ in engine_comparisons(ast.parse(code))] == [1, 2, 3]
