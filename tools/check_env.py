"""Fail the set-up if both onnxruntime and onnxruntime-gpu are installed.

They install into the same folder and silently overwrite each other's files, so a mixed
install gives a runtime whose providers and version depend on installation order.

Also say, in one line with the apt command, which system packages the window's Qt xcb
platform plugin lacks (a fresh Debian/Ubuntu server lacks libxcb-cursor0 and more): a
warning, since the CLI and the headless tests run without them.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    names = {d.metadata["Name"].lower() for d in metadata.distributions()}
    # onnxruntime-extensions and onnxruntime-genai(-cuda) sit on top of the runtime and
    # install into their own folders.
    found = sorted(
        n
        for n in names
        if n.startswith("onnxruntime")
        and not n.startswith(("onnxruntime-extensions", "onnxruntime-genai"))
    )
    if len(found) != 1:
        print(
            f"check_env: expected exactly one ONNX Runtime package, found {found or 'none'}; "
            "uninstall all of them and reinstall onnxruntime-gpu",
            file=sys.stderr,
        )
        return 1
    import onnxruntime

    print(
        f"check_env: {found[0]} {onnxruntime.__version__}, providers "
        f"{', '.join(onnxruntime.get_available_providers())}"
    )
    qt_libraries()
    return 0


def qt_libraries() -> None:
    """A warning naming the packages Qt's xcb plugin lacks, with the apt command."""
    sys.path.insert(0, str(ROOT))
    from app.shell.qt_platform import xcb_problem

    problem = xcb_problem()
    if problem is not None:
        print(
            f"check_env: warning: the window cannot open on a desktop here: {problem} "
            "(the CLI and headless runs, QT_QPA_PLATFORM=offscreen, need none of them)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    sys.exit(main())
