"""engine/ is plain Python: importing all of it loads no Qt (napari's contract)."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import engine

ROOT = Path(__file__).resolve().parent.parent


def test_engine_imports_no_qt() -> None:
    modules = [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")]
    assert "engine.run.bench" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('PySide6', 'PyQt5', 'PyQt6', 'pyqtgraph', 'shiboken6', 'widgets', 'app'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


def test_help_needs_no_heavy_imports() -> None:
    """`opscope --help` is instant: no onnxruntime, onnx or torch behind it."""
    code = (
        "import sys\nfrom engine.cli.main import build_parser\nbuild_parser()\n"
        "print(','.join(m for m in ('onnxruntime', 'onnx', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


def _engine_graph() -> dict[str, set[str]]:
    import grimp

    graph = grimp.build_graph("engine", "widgets", "app")
    mods = set(graph.modules)
    return {m: set(graph.find_modules_directly_imported_by(m)) & mods for m in mods}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_circles() -> None:
    """Function-level and type-only imports count: a circle is a circle."""
    assert _cycles(_engine_graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]


def test_engine_keeps_at_most_eight_modules_at_its_top() -> None:
    """Besides api.py, the window's surface, which sits at the top on purpose."""
    top = sorted(p.name for p in (ROOT / "engine").glob("*.py") if p.name != "api.py")
    assert len(top) <= 8, top


def test_the_window_contract_forbids_every_engine_module_but_the_api() -> None:
    """app/ and widgets/ reach the engine through engine.api: the import-linter contract
    must name every other part of engine/, including one added later."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (window,) = [c for c in contracts["contracts"] if "engine.api only" in c["name"]]
    parts = {f"engine.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "engine")])}
    assert set(window["forbidden_modules"]) == parts - {"engine.api"}
    assert set(window["source_modules"]) == {"app", "widgets"}


def test_the_window_imports_the_engine_through_its_api_only() -> None:
    """The same rule read off the sources (lint-imports runs in `make lint`, this in the
    suite): no `from engine.x import` in app/ or widgets/ but engine.api (app/entry.py
    hands command lines to the CLI)."""
    import ast

    offenders = []
    for path in [*(ROOT / "app").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")]:
        if path.relative_to(ROOT).as_posix() == "app/entry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if (name == "engine" or name.startswith("engine.")) and name != "engine.api":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert offenders == []


def test_no_branch_on_an_engine_name_outside_the_backends() -> None:
    """`config.engine == "torch"` and the like live only in engine/backends/<name>/: the
    others ask a backend (its capabilities, `opens`, `prepare`)."""
    import ast

    from engine import backends

    names = set(backends.names())
    offenders = []
    for folder in ("engine", "app", "widgets"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.is_relative_to(ROOT / "engine" / "backends"):
                continue
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.Compare):
                    continue
                operands = [node.left, *node.comparators]
                named = any(
                    isinstance(v, ast.Constant) and v.value in names
                    for op in operands
                    for v in (op.elts if isinstance(op, ast.Tuple | ast.List | ast.Set) else [op])
                )
                about_engine = any("engine" in ast.unparse(op) for op in operands)
                if named and about_engine:  # not e.g. a session's "onnxruntime" version key
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_window_is_in_rooms() -> None:
    """app/ holds one folder per part (the desk, the shell, the host, the live run, the
    sessions, a generating model's live view) or per room (tests/test_rooms_contract.py
    checks the rooms against app/shell/rooms.py) and, at its top, only the console script:
    a new file says which room it is in, and each folder says what it holds."""
    top = sorted(p.name for p in (ROOT / "app").glob("*.py"))
    assert top == ["__init__.py", "entry.py"], top
    folders = sorted(p.name for p in (ROOT / "app").iterdir() if p.is_dir() and p.name[0] != "_")
    assert {"desk", "host", "live", "llm", "sessions", "shell"} <= set(folders), folders
    for folder in folders:
        doc = (ROOT / "app" / folder / "__init__.py").read_text()
        assert doc.startswith('"""') and len(doc) > 40, folder
