"""The graph view's drawing surface: a QGraphicsView of node boxes and routed edges, with
pan (drag), zoom (wheel, + and -), fit (F), a minimap in its corner that moves the view,
hover text asked for only when shown, and the time each paint takes (the benchmark reads
it). Labels are drawn only once boxes are big enough on screen to read them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QEvent, QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPen,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsPathItem,
    QGraphicsScene,
    QGraphicsView,
    QStyleOptionGraphicsItem,
    QToolTip,
    QWidget,
)

from widgets.models.graph_scene import Node, Scene

LABEL_LOD = 0.45  # below this zoom the boxes are drawn without text
BOX = QColor("#f4f4f4")
BORDER = QColor("#5a5a5a")
PICKED = QColor("#1f6feb")
FOUND = QColor("#f2b600")
GROUP = QColor("#8250df")  # the loaded nodes a fused node replaced


class NodeItem(QGraphicsItem):
    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node
        x, y, w, h = node.rect
        self.box = QRectF(x, y, w, h)
        self.fill = QColor(BOX)
        self.value = ""
        self.mark: QColor | None = None  # picked, found, in the picked node's group
        self.setZValue(-1 if node.container else 1)

    def boundingRect(self) -> QRectF:
        return self.box.adjusted(-3, -3, 3, 3)

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        lod = option.levelOfDetailFromTransform(painter.worldTransform())
        n = self.node
        pen = QPen(self.mark or BORDER, 3 if self.mark else 1)
        pen.setCosmetic(not self.mark)
        if n.op == "Block":
            pen.setStyle(Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.setBrush(QBrush(QColor("#ffffff") if n.container else self.fill))
        radius = 10.0 if n.op in ("Input", "Output") else 3.0
        painter.drawRoundedRect(self.box, radius, radius)
        if lod < LABEL_LOD:
            return
        painter.setPen(QColor("#111111"))
        font = QFont()
        font.setPixelSize(11)
        font.setBold(not n.container)
        painter.setFont(font)
        if n.container:
            painter.drawText(self.box.adjusted(6, 2, -4, 0), Qt.AlignmentFlag.AlignTop, n.label)
            return
        text = n.label if not self.value or self.box.height() < 40 else f"{n.label}\n{self.value}"
        painter.drawText(self.box, Qt.AlignmentFlag.AlignCenter, text)


class EdgeLabels(QGraphicsItem):
    """Each edge's tensor shape, small, beside its middle: drawn only where in view and once
    boxes are big enough to read (one item for all of them: thousands of edges)."""

    def __init__(self, labels: list[tuple[float, float, str]], bounds: QRectF) -> None:
        super().__init__()
        self.labels = labels
        self.bounds = bounds
        self.setZValue(0.7)

    def boundingRect(self) -> QRectF:
        return self.bounds

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        if option.levelOfDetailFromTransform(painter.worldTransform()) < LABEL_LOD:
            return
        seen = option.exposedRect
        font = QFont()
        font.setPixelSize(9)
        painter.setFont(font)
        painter.setPen(QColor("#6a6a6a"))
        for x, y, text in self.labels:
            if seen.contains(x, y):
                painter.drawText(QPointF(x + 4, y + 3), text)


def edge_label_points(
    edges: list[tuple[str, str, list[tuple[float, float]]]], shapes: dict[tuple[str, str], str]
) -> list[tuple[float, float, str]]:
    """Where each edge's shape goes: the middle of its route."""
    out = []
    for src, dst, pts in edges:
        text = shapes.get((src, dst))
        if text and pts:
            if len(pts) >= 2:
                (ax, ay), (bx, by) = (
                    pts[(len(pts) - 1) // 2],
                    pts[len(pts) // 2 if len(pts) > 2 else 1],
                )
                out.append(((ax + bx) / 2, (ay + by) / 2, text))
            else:
                out.append((pts[0][0], pts[0][1], text))
    return out


class GraphCanvas(QGraphicsView):
    picked = Signal(str)  # a node clicked ("" for the background)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setScene(QGraphicsScene(self))
        self.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setBackgroundBrush(QColor("#ffffff"))
        self.items_by_name: dict[str, NodeItem] = {}
        self.edges = QGraphicsPathItem()
        self.lit = QGraphicsPathItem()  # the picked node's edges
        self.edge_labels: EdgeLabels | None = None
        self.tip_for: Callable[[str], str] = lambda name: name
        self.frame_ms: list[float] = []  # each paint's time, newest last (kept short)
        self._press: QPointF | None = None
        self.minimap = Minimap(self)

    def show_scene(
        self, scene: Scene | None, shapes: dict[tuple[str, str], str] | None = None
    ) -> None:
        """`scene` drawn; `shapes`: each edge's (src, dst) tensor shape, written beside it."""
        s = self.scene()
        s.clear()
        self.edge_labels = None
        self.items_by_name = {}
        self.edges = QGraphicsPathItem()
        self.lit = QGraphicsPathItem()
        if scene is None:
            self.minimap.hide()
            return
        path = QPainterPath()
        for _src, _dst, pts in scene.edges:
            if pts:
                path.moveTo(*pts[0])
                for p in pts[1:]:
                    path.lineTo(*p)
        pen = QPen(QColor("#9a9a9a"), 1)
        pen.setCosmetic(True)
        self.edges.setPath(path)
        self.edges.setPen(pen)
        self.edges.setZValue(0)
        s.addItem(self.edges)
        lit = QPen(PICKED, 2)
        lit.setCosmetic(True)
        self.lit.setPen(lit)
        self.lit.setZValue(0.5)
        s.addItem(self.lit)
        for node in scene.nodes:
            item = NodeItem(node)
            s.addItem(item)
            self.items_by_name[node.name] = item
        x, y, w, h = scene.bounds
        s.setSceneRect(QRectF(x - 40, y - 40, w + 80, h + 80))
        if shapes:
            self.edge_labels = EdgeLabels(
                edge_label_points(scene.edges, shapes), QRectF(x - 40, y - 40, w + 200, h + 80)
            )
            s.addItem(self.edge_labels)
        self.minimap.show()
        self.minimap.fit()

    def light_edges(self, scene: Scene | None, name: str) -> None:
        path = QPainterPath()
        for src, dst, pts in scene.edges if scene is not None else []:
            if pts and name in (src, dst):
                path.moveTo(*pts[0])
                for p in pts[1:]:
                    path.lineTo(*p)
        self.lit.setPath(path)

    def fit(self, readable: bool = True) -> None:
        """The whole graph in view when it is readable so; else (a long graph, which fitted
        whole was a thin column of unreadable boxes) its width, at a readable size at
        least, from its top: scroll down it, or pan with the minimap. `readable` False:
        the whole graph however small (an export, the benchmark's whole-graph frame)."""
        rect = self.scene().sceneRect()
        if rect.isEmpty():
            return
        self.fitInView(rect, Qt.AspectRatioMode.KeepAspectRatio)
        scale = self.transform().m11()
        if scale > 1.5 or (readable and scale < LABEL_LOD):
            vp = self.viewport().rect()
            by_width = (vp.width() - 4) / max(rect.width(), 1.0)
            to = 1.5 if scale > 1.5 else min(max(by_width, 0.9), 1.5)
            self.resetTransform()
            self.scale(to, to)
            if scale > 1.5:
                self.centerOn(rect.center())
            else:
                seen = self.mapToScene(vp).boundingRect()
                self.centerOn(rect.center().x(), rect.top() + seen.height() / 2)
        self.minimap.update()

    def centre_on(self, name: str) -> None:
        item = self.items_by_name.get(name)
        if item is None:
            return
        if self.transform().m11() < 0.6:  # zoomed far out: close enough to read it
            self.resetTransform()
            self.scale(0.8, 0.8)
        self.centerOn(item.box.center())

    def zoom(self, factor: float) -> None:
        scale = self.transform().m11() * factor
        if 0.01 <= scale <= 8.0:
            self.scale(factor, factor)
            self.minimap.update()

    def wheelEvent(self, event: QWheelEvent) -> None:
        self.zoom(1.2 if event.angleDelta().y() > 0 else 1 / 1.2)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key == Qt.Key.Key_F:
            self.fit()
        elif key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom(1.25)
        elif key == Qt.Key.Key_Minus:
            self.zoom(0.8)
        else:
            super().keyPressEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._press = event.position()
        super().mousePressEvent(event)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        super().mouseReleaseEvent(event)
        if self._press is not None and (event.position() - self._press).manhattanLength() < 4:
            self.picked.emit(self.name_at(event.position()))  # a click, not a drag
        self._press = None

    def name_at(self, pos: QPointF) -> str:
        for item in self.items(pos.toPoint()):
            if isinstance(item, NodeItem) and not item.node.container:
                return item.node.name
        for item in self.items(pos.toPoint()):
            if isinstance(item, NodeItem):
                return item.node.name
        return ""

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            name = self.name_at(QPointF(event.pos()))  # type: ignore[attr-defined]
            if name:
                QToolTip.showText(event.globalPos(), self.tip_for(name), self)  # type: ignore[attr-defined]
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:
        t0 = time.perf_counter()
        super().paintEvent(event)
        self.frame_ms = [*self.frame_ms[-199:], (time.perf_counter() - t0) * 1e3]

    def scrollContentsBy(self, dx: int, dy: int) -> None:
        super().scrollContentsBy(dx, dy)
        self.minimap.update()

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        self.minimap.place()


class Minimap(QGraphicsView):
    """The whole graph, small, in the canvas's corner, with the part in view outlined;
    a click or drag there moves the view."""

    SIZE = (170, 130)

    def __init__(self, canvas: GraphCanvas) -> None:
        super().__init__(canvas)
        self.canvas = canvas
        self.setScene(canvas.scene())
        self.setInteractive(False)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setStyleSheet("border: 1px solid #888; background: rgba(255,255,255,230)")
        self.setToolTip("The whole graph: click or drag to move the view (F fits it)")
        self.resize(*self.SIZE)
        self.hide()

    def place(self) -> None:
        vp = self.canvas.viewport().geometry()
        self.move(vp.right() - self.width() - 6, vp.bottom() - self.height() - 6)

    def fit(self) -> None:
        self.place()
        self.fitInView(self.scene().sceneRect(), Qt.AspectRatioMode.KeepAspectRatio)

    def drawForeground(self, painter: QPainter, rect: QRectF | QRect) -> None:
        seen = self.canvas.mapToScene(self.canvas.viewport().rect()).boundingRect()
        pen = QPen(PICKED, 2)
        pen.setCosmetic(True)
        painter.setPen(pen)
        painter.setBrush(QColor(31, 111, 235, 30))
        painter.drawRect(seen)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self.canvas.centerOn(self.mapToScene(event.position().toPoint()))
        self.viewport().update()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if event.buttons():
            self.mousePressEvent(event)

    def wheelEvent(self, event: QWheelEvent) -> None:
        self.canvas.wheelEvent(event)

    def update(self) -> None:  # type: ignore[override]
        self.viewport().update()
