"""The README's window screenshots, made the way a user gets there: the detector-sized CNN
(bench/models/detector_cnn.py) opened live, switched to INT8 static in the Configuration
panel, then grabbed once its INT8 run has samples and an operator profile, at 1024x700 and
at 1600x1000. Needs a display (Xvfb):

    xvfb-run -a -s "-screen 0 1700x1100x24" env QT_QPA_PLATFORM=xcb \\
        .venv/bin/python tools/screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "models"))

SIZES = ((1024, 700), (1600, 1000))
TIMEOUT_S = 240.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(ROOT / "docs"))
    args = ap.parse_args()
    from detector_cnn import DEFAULT, build
    from PySide6.QtWidgets import QApplication

    model = DEFAULT if DEFAULT.is_file() else build()
    app = QApplication(sys.argv[:1])
    from app.shell.workbench import Workbench

    with tempfile.TemporaryDirectory() as tmp:
        wb = Workbench(session_path=str(Path(tmp) / "shots.opscope"), usable=["cpu"])
        w = wb.window

        def wait(what: str, done: object) -> None:
            end = time.monotonic() + TIMEOUT_S
            while not done():  # type: ignore[operator]
                app.processEvents()
                time.sleep(0.02)
                if time.monotonic() > end:
                    w.grab().save(str(Path(args.out) / "screenshot_timeout.png"))
                    raise SystemExit(
                        f"screenshots: timed out waiting for {what} "
                        f"(the window as it was: screenshot_timeout.png)"
                    )

        try:
            w.resize(*SIZES[0])
            w.show()
            wb.start(str(model))
            wait("FP32 samples", lambda: wb.controller.samples > 50)
            panel = w.config_panel
            panel.precision.setCurrentIndex(panel.precision.findData("int8-static"))
            wait("the INT8 static run", lambda: w.variant_label.text().startswith("int8-static"))
            start = wb.controller.samples
            wait("INT8 samples", lambda: wb.controller.samples > start + 200)
            t_int8 = time.monotonic() + 12.0  # some INT8 history on the plot
            wait("INT8 history", lambda: time.monotonic() > t_int8)
            profiled = wb.controller.last_profile
            wb.client.profile_now()  # as Run > Profile Now does
            wait("an INT8 profile", lambda: wb.controller.last_profile is not profiled)
            w.roofline_dock.raise_()  # its tab, as a user clicks it: the legend in view
            for width, height in SIZES:
                w.resize(width, height)
                t = time.monotonic() + 3.0
                wait("a repaint", lambda t=t: time.monotonic() > t)
                path = Path(args.out) / f"screenshot_{width}x{height}.png"
                if not w.grab().save(str(path)):
                    raise SystemExit(f"screenshots: cannot write {path}")
                print(f"{path} ({w.width()}x{w.height()})")
            # the Graph tab, as a user clicks it: the INT8 graph as run, heat on, the
            # slowest node picked (its op table row with it)
            w.graph_dock.raise_()
            graph = w.graph.view  # type: ignore[attr-defined]
            wait("the graph", lambda: graph.result is not None and graph.painted.colors)
            top = max(wb.controller.last_profile.ops, key=lambda s: s.share)
            graph.select_node(top.name)
            graph._clicked(top.name)
            t = time.monotonic() + 3.0
            wait("a repaint", lambda: time.monotonic() > t)
            path = Path(args.out) / "screenshot_graph.png"
            if not w.grab().save(str(path)):
                raise SystemExit(f"screenshots: cannot write {path}")
            print(f"{path} ({w.width()}x{w.height()})")
        finally:
            wb.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
