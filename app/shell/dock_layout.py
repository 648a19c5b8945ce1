"""How the main window's docks are laid out and toggled, apart from what they hold: the
first layout, chosen by the window's size at first start (a small screen: the bottom docks
in one tab group, the lesser rooms closed, the plot 40% of the height or more); dock tabs
whose names read whole; a dock's toggle that raises it from behind another tab; a dock
grown to show every line of its content; tab bars no group uses any more hidden."""

from __future__ import annotations

from PySide6.QtCore import QObject, QSize, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMainWindow, QScrollArea, QTabBar, QWidget

SMALL = QSize(1400, 860)  # a window smaller either way at first start: the small layout
# closed at first start on a small screen (View and their shortcuts bring them back)
SMALL_CLOSED = ("Traffic", "Tune", "Scaling", "Memory", "Messages")
BOTTOM_SHARE = {True: 0.3, False: 0.4}  # the bottom docks' share of the height (small?)
OPERATORS_SHARE = 0.6  # a large screen: the operators' tab group's share of the width


def first_layout(window: QMainWindow, ops: QDockWidget, left: QDockWidget, size: QSize) -> None:
    """The docks at first start (no saved layout) for a window of `size`; `ops` heads the
    bottom docks' tab group, `left` is the left column's dock."""
    small = size.width() < SMALL.width() or size.height() < SMALL.height()
    bottom = Qt.DockWidgetArea.BottomDockWidgetArea
    docks = [d for d in window.findChildren(QDockWidget)
             if window.dockWidgetArea(d) == bottom and not d.isFloating()]  # fmt: skip
    if small:
        for dock in docks:
            if dock is not ops and dock not in window.tabifiedDockWidgets(ops):
                window.tabifyDockWidget(ops, dock)
            if dock.windowTitle() in SMALL_CLOSED:
                dock.close()
        ops.raise_()
    else:  # the operators' group (the LLM Serving form, the Tune table) the wider
        width = int((size.width() - left.width()) * OPERATORS_SHARE)
        window.resizeDocks([ops], [width], Qt.Orientation.Horizontal)
    height = int(size.height() * BOTTOM_SHARE[small])
    window.resizeDocks([ops], [height], Qt.Orientation.Vertical)
    QTimer.singleShot(0, window, lambda: hide_stale_tab_bars(window))  # once laid out


def hide_stale_tab_bars(window: QMainWindow) -> None:
    """Hide the window's dock tab bars that show no group of docks it has now. Regrouping
    docks (tabifying them at first start, restoring a saved layout) leaves the bars of the
    groups that emptied shown, painted over the docks: a ghost row of tabs under the real
    ones ("Operators Traffic Tune" above the Runs table at 1024x700)."""
    groups = set()
    for dock in window.findChildren(QDockWidget):
        if not dock.isHidden():
            mates = [d for d in window.tabifiedDockWidgets(dock) if not d.isHidden()]
            groups.add(frozenset(d.windowTitle() for d in [dock, *mates]))
    for bar in window.findChildren(QTabBar):
        if bar.parentWidget() is window and bar.isVisible():
            titles = frozenset(bar.tabText(i) for i in range(bar.count()))
            if titles not in groups:
                bar.hide()


def legible_tabs(child: QObject) -> None:
    """A dock tab group's bar (`child` as the window polishes it): names whole, scrolled
    when they do not fit (Qt elides them: "Opera…", "T…" at 1024x700)."""
    if isinstance(child, QTabBar):
        child.setElideMode(Qt.TextElideMode.ElideNone)
        child.setUsesScrollButtons(True)


def raise_or_toggle(window: QMainWindow, dock: QDockWidget) -> None:
    """A dock's toggle (its shortcut, its View entry): a closed dock opens in front, a dock
    open behind another tab comes to the front, and only one in front closes."""
    if dock.isHidden():
        dock.show()
        dock.raise_()
    elif window.isVisible() and dock.visibleRegion().isEmpty():
        dock.raise_()  # open, behind another tab
    else:
        dock.close()
    dock.toggleViewAction().setChecked(not dock.isHidden())


def own_toggle(window: QMainWindow, dock: QDockWidget) -> None:
    """`dock`'s toggle action (shortcut, View entry) as `raise_or_toggle` says."""
    toggle = dock.toggleViewAction()
    toggle.triggered.disconnect()  # QDockWidget's own: hide whatever is open
    toggle.triggered.connect(lambda _=False: raise_or_toggle(window, dock))


def fit_lower(
    window: QMainWindow, upper: QDockWidget, lower: QDockWidget, content: QWidget
) -> None:
    """`lower` (split under `upper`, its widget a scroll area around `content`) tall
    enough for every line of `content`, up to half the window, taken from `upper`."""
    area, lines = lower.widget(), content.layout()
    if not (isinstance(area, QScrollArea) and lines is not None and lower.isVisible()):
        return
    viewport = area.viewport()
    short = lines.totalHeightForWidth(viewport.width()) - viewport.height()
    half = window.height() // 2
    if short > 0 and lower.height() < half:
        grow = min(short, half - lower.height())
        heights = [upper.height() - grow, lower.height() + grow]
        window.resizeDocks([upper, lower], heights, Qt.Orientation.Vertical)
