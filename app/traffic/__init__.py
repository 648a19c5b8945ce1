"""The Traffic room: load runs on the loaded model (a traffic pattern, a dynamic batcher, a
response cache), the SLO on the live plot, and the What-if view the simulator draws
(app/traffic/controller.py), in a dock tabbed with the Operators (app/traffic/view.py);
Run > Run Load and Stop Load."""

from __future__ import annotations

from app.desk import Desk, DockPlace, MenuItem
from app.traffic.controller import TrafficController
from app.traffic.view import TrafficDock

TITLE = "Traffic"


def install(desk: Desk) -> TrafficController:
    view = TrafficDock()
    place = DockPlace(tab_with="Operators", shortcut="Ctrl+Shift+F", raise_after="Operators")
    dock = desk.add_dock(TITLE, view, place)
    controller = TrafficController(desk, view)

    def run_load() -> None:
        """Run load with the dock's settings, the dock shown."""
        dock.show()
        dock.raise_()
        view.run()

    desk.add_actions(
        [
            MenuItem("&Run", "Run &Load", run_load,
                     None,  # Ctrl+L lives on the dock's button
                     "Serve the loaded model under the Traffic dock's traffic, batching and cache",
                     separator_before=True),
            MenuItem("&Run", "S&top Load", controller.stop_load, "Ctrl+Shift+L",
                     "Stop sending load"),
        ]
    )  # fmt: skip
    return controller
