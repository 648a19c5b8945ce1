"""The window's rooms keep their shape (docs/architecture.md, "The window: rooms at a desk"):
each room is a folder with `install(desk)`; it uses the desk and nothing of another room or
of the shell; its controller imports no QtWidgets and is typed against its view's Protocol;
nothing outside the live room reads the configuration off its widget; the window says
things to the user one way. Read from the source (ast), so a new room is checked as it
lands."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from app.shell.rooms import ROOMS

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
# the parts of app/ that are not rooms: a room may use the desk (and what the desk is
# made of); the shell installs the rooms; the live room owns the configuration and inputs
NOT_ROOMS = {"desk", "host", "live", "llm", "sessions", "shell"}


def _room_names() -> list[str]:
    return [install.__module__.split(".")[1] for install in ROOMS]


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names]
    return out


def _py(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def test_every_folder_of_app_is_a_room_the_shell_installs_or_a_named_part() -> None:
    rooms = _room_names()
    assert len(rooms) == len(set(rooms)) >= 7, rooms
    folders = {p.name for p in APP.iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert folders == set(rooms) | NOT_ROOMS, folders ^ (set(rooms) | NOT_ROOMS)
    for room in rooms:
        init = (APP / room / "__init__.py").read_text()
        assert init.startswith('"""') and "def install(desk: Desk)" in init, room
        assert (APP / room / "controller.py").is_file(), room
        assert (APP / room / "port.py").is_file(), room


def test_a_room_uses_the_desk_and_nothing_of_another_room_or_the_shell() -> None:
    rooms = _room_names()
    offenders = []
    for room in rooms:
        for path in _py(APP / room):
            for name in _imports(path):
                parts = name.split(".")
                if parts[0] != "app" or len(parts) < 2 or parts[1] in (room, "desk"):
                    continue
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offenders == []


def test_controllers_import_no_widgets_and_take_no_untyped_collaborators() -> None:
    offenders = []
    for path in _py(APP):
        tree = ast.parse(path.read_text())
        if path.name == "controller.py":
            offenders += [
                f"{path.relative_to(ROOT)} imports {name}"
                for name in _imports(path)
                if name.startswith("PySide6.QtWidgets")
            ]
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and (
                node.name == "__init__" or node.name.startswith("install")
            ):
                for arg in node.args.args + node.args.kwonlyargs:
                    if arg.annotation is not None and ast.unparse(arg.annotation) == "Any":
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {arg.arg}: Any")
    assert offenders == []


def test_no_room_reaches_through_a_workbench_or_reads_the_config_off_its_widget() -> None:
    reach = re.compile(r"self\.wb\.|\bwb\.window\.")
    config = re.compile(r"config_panel\.config\(\)|\.last_load\b|\.job_inputs\(\)")
    offenders = []
    for path in _py(APP):
        text = path.read_text()
        part = path.relative_to(APP).parts[0]
        for i, line in enumerate(text.splitlines(), 1):
            if reach.search(line) and part != "shell":
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
            if config.search(line) and part not in ("live", "shell", "host"):
                offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert offenders == []


def test_the_window_tells_the_user_things_one_way() -> None:
    """Errors, warnings and information go through a window's `notify` (app/desk/notices.py):
    no message boxes for them, no banner or status bar written to directly. The About box
    and the fatal start-up error (no window yet) are not notices."""
    direct = re.compile(
        r"QMessageBox\.(warning|information|critical|question)|\.show_message\(|"
        r"statusBar\(\)\.showMessage|\.show_error\("
    )
    allowed = {
        "app/desk/notices.py",  # the one path itself
        "app/shell/launch.py",  # before any window exists: a fatal start-up error
    }
    offenders = []
    for path in _py(APP):
        rel = str(path.relative_to(ROOT))
        if rel in allowed:
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if direct.search(line):
                offenders.append(f"{rel}:{i}: {line.strip()}")
    assert offenders == []


def test_the_import_contracts_name_every_room() -> None:
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    rooms = {f"app.{r}" for r in _room_names()}
    independent = next(c for c in contracts if c["type"] == "independence" and
                       c["modules"][0].startswith("app."))  # fmt: skip
    forbidden = next(c for c in contracts if "app.shell" in c.get("forbidden_modules", []))
    assert set(independent["modules"]) == rooms
    assert set(forbidden["source_modules"]) == rooms


def test_no_controller_test_sets_attributes_on_its_doubles() -> None:
    """A room's view Protocol and the Desk are complete: a controller's test configures what
    its doubles return, never hands them a child widget or a value by hand."""
    assign = re.compile(r"^\s*(view|desk|dock|frame|panel)\.([\w.]+)\s*=[^=]")
    offenders = []
    for path in sorted((ROOT / "tests").glob("test_*controller*.py")):
        for i, line in enumerate(path.read_text().splitlines(), 1):
            m = assign.match(line)
            if m and m.group(2).rsplit(".", 1)[-1] not in ("return_value", "side_effect"):
                offenders.append(f"{path.name}:{i}: {line.strip()}")
    assert offenders == []
