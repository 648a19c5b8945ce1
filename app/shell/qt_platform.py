"""Whether the window can open here, asked before Qt is: a display to open it on, and the
system libraries Qt's xcb platform plugin loads (a fresh Debian or Ubuntu server lacks
libxcb-cursor0 and more, and Qt then aborts with a core dump). Each answer is one line that
says what to do: the apt command naming the packages, or the headless platform.

No Qt here (the set-up's tools/check_env.py asks it before any window exists); the plugin
is found in the installed PySide6 and its missing libraries read from `ldd`."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

# the shared libraries Qt's xcb plugin (and Qt's GUI under it) loads -> the Debian/Ubuntu
# package that ships each (Debian 12, Ubuntu 22.04 and 24.04)
DEBIAN_PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-glx.so.0": "libxcb-glx0",
    "libxcb.so.1": "libxcb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libSM.so.6": "libsm6",
    "libICE.so.6": "libice6",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libOpenGL.so.0": "libopengl0",
    "libGLX.so.0": "libglx0",
    "libglib-2.0.so.0": "libglib2.0-0",
}
HEADLESS = "QT_QPA_PLATFORM=offscreen"


def xcb_plugin() -> Path | None:
    """The installed PySide6's xcb platform plugin, or None (no PySide6, or not Linux)."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        plugin = Path(folder) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.is_file():
            return plugin
    return None


def missing_libraries(plugin: Path) -> list[str]:
    """The shared libraries `ldd` says `plugin` needs and cannot find, in its order (none
    when there is no ldd: nothing can be said)."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        out = subprocess.run(
            [ldd, str(plugin)], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    missing: list[str] = []
    for line in out.splitlines():
        name, sep, where = line.strip().partition(" => ")
        if sep and where.strip() == "not found" and name not in missing:
            missing.append(name)
    return missing


def apt_line(missing: list[str]) -> str:
    """'sudo apt-get install -y libxcb-cursor0 ...' for the packages of `missing`; the
    names without a known package follow, to look up."""
    packages = sorted({DEBIAN_PACKAGES[m] for m in missing if m in DEBIAN_PACKAGES})
    unknown = [m for m in missing if m not in DEBIAN_PACKAGES]
    line = f"sudo apt-get install -y {' '.join(packages)}" if packages else ""
    if unknown:
        line += ("; and " if line else "") + "the packages that ship " + ", ".join(unknown)
    return line


def xcb_problem() -> str | None:
    """Why Qt's xcb plugin will not load here, in one line that names the packages to
    install; None when it loads (or there is no such plugin to ask about)."""
    plugin = xcb_plugin()
    if plugin is None:
        return None
    missing = missing_libraries(plugin)
    if not missing:
        return None
    return (
        f"Qt's xcb platform plugin ({plugin.name}) cannot load: {', '.join(missing)} "
        f"missing; install them with: {apt_line(missing)}"
    )


def window_problem(env: dict[str, str] | None = None) -> str | None:
    """Why the window cannot open here (no display; the xcb plugin's libraries missing),
    in one line that says what to do; None when it can, or when Qt is told another
    platform (offscreen, wayland, vnc...)."""
    env = dict(os.environ) if env is None else env
    if not sys.platform.startswith("linux"):
        return None
    platform = env.get("QT_QPA_PLATFORM", "").strip()
    if platform and not platform.startswith("xcb"):
        return None  # offscreen, wayland, vnc...: Qt's own business
    if not platform and env.get("WAYLAND_DISPLAY"):
        return None  # Qt may open on Wayland
    if not env.get("DISPLAY"):
        return (
            "no display to open the window on (DISPLAY is not set): run it on a desktop, "
            f"over `ssh -X`, or headless with {HEADLESS} (e.g. with --screenshot PNG)"
        )
    problem = xcb_problem()
    if problem is None:
        return None
    return f"{problem} (or run headless with {HEADLESS})"
