"""Render resources/icons/opscope.svg to a 256x256 PNG with Qt (run with the project venv)."""

import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    src = root / "resources" / "icons" / "opscope.svg"
    dst = root / "resources" / "icons" / "opscope.png"
    _app = QGuiApplication.instance() or QGuiApplication(["render_icon", "-platform", "offscreen"])
    img = QImage(256, 256, QImage.Format.Format_ARGB32)
    img.fill(Qt.GlobalColor.transparent)
    painter = QPainter(img)
    QSvgRenderer(str(src)).render(painter)
    painter.end()
    if not img.save(str(dst)):
        print(f"render_icon: cannot write {dst}", file=sys.stderr)
        return 1
    print(f"render_icon: wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
