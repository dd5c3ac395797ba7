"""The package's shape (docs/architecture.md): the import graph between pytest-scalene's own
modules has no cycle, and no module imports one of a higher layer (data flows one way: sample ->
profile -> verdict -> report), read from the source with `ast`, imports inside functions
included. No module grows past ~400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_scalene"
NAME = PACKAGE.name
# Lowest first: a module may import its own layer's modules and lower layers' only.
LAYERS = (
    ("core",),  # the profile, the verdict, their codec, the run's environment, file writing
    ("config",),  # options and ini keys
    ("sampling",),  # timers, CPU, memory, GPU samplers, the profiler: sample -> profile
    ("gates",),  # metrics, budgets, comparison, baselines, repeat: profile -> verdict
    ("reports",),  # terminal, Markdown, HTML, JSON, speedscope: profile + verdict -> report
    # more sessions, and the benchmark fixture's tests
    ("subprocesses", "xdist", "instructions", "history", "compare_ref", "selection", "benchmark"),
    ("plugin", "profiling_session", "cli"),  # the entry points: pytest's hooks, the command line
)
MAX_LINES = 420  # "about 400"
# Built by CMake, at the top of the package.
EXTENSIONS = {"_native", "_callgrind", "_timer_calls", "_resident_calls"}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if "site" in parts[:-1]:  # subprocesses/site/sitecustomize.py: a file put on PYTHONPATH
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module + ".").startswith(NAME + "."):
                target = node.module[len(NAME) + 1 :]
            else:
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}" if target else alias.name
                found.add(full if full in known or alias.name in EXTENSIONS else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.name + ".").startswith(NAME + "."):
                    found.add(alias.name[len(NAME) + 1 :])
    return {t for t in found if t in known and t not in (name, "")}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def layer(name: str) -> int:
    top = name.split(".")[0]
    for number, names in enumerate(LAYERS):
        if top in names:
            return number
    raise AssertionError(f"{name}: in no layer of tests/test_architecture.py (add it)")


def test_every_module_is_in_a_layer():
    for name in graph():
        if name:
            layer(name)


def test_no_import_runs_up_a_layer():
    upward = [
        f"{name} (layer {layer(name)}) imports {target} (layer {layer(target)})"
        for name, targets in graph().items()
        if name
        for target in sorted(targets)
        if target and layer(target) > layer(name)
    ]
    assert not upward, "imports running back up:\n" + "\n".join(upward)


def test_the_import_graph_has_no_cycle():
    edges = graph()
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> None:
        if name in path:
            cycle = path[path.index(name) :] + [name]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        path.append(name)
        for target in sorted(edges.get(name, ())):
            visit(target)
        path.pop()
        done.add(name)

    for name in sorted(edges):
        visit(name)


def test_the_checks_see_imports():
    edges = graph()
    assert "core.model" in edges["sampling.profiler"]
    assert "gates.judging" in edges["profiling_session"]  # `from .gates.judging import Gates`
    assert "profiling_session" in edges["plugin"]  # `from . import profiling_session`, in a hook
    assert "sampling.preload" in edges["plugin"]  # `from .sampling import preload`


def test_no_module_is_over_about_400_lines():
    long = {
        str(path.relative_to(PACKAGE)): count
        for path in PACKAGE.rglob("*.py")
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines (split them by what they own): {long}"


def test_no_module_imports_another_modules_private_names():
    """A helper another module needs is public: an underscored import ties the two modules'
    insides together where no reader looks for it (the extension modules excepted)."""
    known = modules()
    found = []
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (
                node.level or (node.module or "").startswith(NAME)
            ):
                continue
            private = [
                a.name for a in node.names if a.name.startswith("_") and a.name not in EXTENSIONS
            ]
            if private:
                found.append(f"{name}: from {'.' * node.level}{node.module or ''} import {private}")
    assert not found, found


def _is_extra(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "extra") or (
        isinstance(node, ast.Name) and node.id == "extra"
    )


def _extra_key_expressions(tree: ast.AST) -> list[ast.expr]:
    """The keys read or written on an `extra` dict: `extra[k]`, `extra.get(k)`, `.pop`,
    `.setdefault`, `k in extra`."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_extra(node.value):
            found.append(node.slice)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and _is_extra(node.func.value)
            and node.args
        ):
            found.append(node.args[0])
        elif isinstance(node, ast.Compare) and any(_is_extra(c) for c in node.comparators):
            found.append(node.left)
    return found


def test_extra_keys_are_spelled_once_in_the_registry():
    """Data crossing modules in `extra` goes by the names of core/extra_keys.py: a key written as
    a string of its own (here or in a loop over a tuple of strings) is a second spelling that a
    reader cannot find, and that a typo turns into a figure nobody reads."""
    found = []
    for name, path in modules().items():
        if name == "core.extra_keys":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        literal_loops = {
            node.target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, (ast.Tuple, ast.List))
            and any(isinstance(e, ast.Constant) for e in node.iter.elts)
        }
        for key in _extra_key_expressions(tree):
            literal = isinstance(key, ast.Constant) and isinstance(key.value, str)
            if literal or (isinstance(key, ast.Name) and key.id in literal_loops):
                found.append(f"{name}:{key.lineno}: {ast.unparse(key)}")
    assert not found, f"extra keys not taken from core/extra_keys.py: {found}"


def test_the_extra_key_registry_spells_each_key_once():
    from pytest_scalene.core import extra_keys

    values = [v for n, v in vars(extra_keys).items() if n.isupper()]
    assert len(values) == len(set(values)), sorted(values)
    assert len(values) >= 30  # the scan reads the module: an empty registry is a broken one


def test_every_judge_is_in_the_pipelines_figure():
    """docs/architecture.md draws the one pipeline: a class that implements the Judge interface
    (gates/pipeline.py) but is not in its figure is a gate a reader cannot find."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    figure = doc.split("## One pipeline", 1)[1].split("```")[1]
    judges = []
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                members = {
                    getattr(n, "name", None) or getattr(getattr(n, "target", None), "id", None)
                    for n in node.body
                }
                members |= {
                    t.id
                    for n in node.body
                    if isinstance(n, ast.Assign)
                    for t in n.targets
                    if isinstance(t, ast.Name)
                }
                if {"verdicts", "cpu_suspect", "confirms_cpu"} <= members:
                    judges.append((node.name, path.relative_to(PACKAGE).as_posix()))
    assert len(judges) >= 4, judges  # budgets, A/B, stored baselines, history (and the Protocol)
    missing = [f"{cls} ({file})" for cls, file in judges if cls != "Judge" and cls not in figure]
    assert not missing, f"judges missing from docs/architecture.md's figure: {missing}"
    assert all(file.split("/")[-1] in figure for cls, file in judges if cls != "Judge")


def test_no_module_defines_an_extra_key_again():
    """A `..._KEY` constant holding one of the registry's keys is the same fact defined twice (as
    "ab" was, in compare_ref/ref_judge.py and reports/markdown_regressions.py)."""
    from pytest_scalene.core import extra_keys

    registered = {v for n, v in vars(extra_keys).items() if n.isupper()}
    found = []
    for name, path in modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and node.value.value in registered
                and any(isinstance(t, ast.Name) and t.id.endswith("_KEY") for t in node.targets)
            ):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, f"define these in core/extra_keys.py only: {found}"
