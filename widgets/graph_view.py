"""The graph view (issue #26): the model's graph as run or as loaded, in full or with its
repeated blocks collapsed, an overlay of live per-node figures with its legend, search by
name or op type, linked selection (a node picked here is picked in the op table and on the
roofline, and back), fusion shown (picking a fused node outlines the loaded nodes it
replaced), and export of the view as SVG or PNG. The data work is in widgets/models/
(graph_scene, graph_overlay); this file paints and routes clicks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QImage, QKeySequence, QPainter, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.api import OpStat, Roofs
from widgets.graph_canvas import FOUND, GROUP, PICKED, GraphCanvas
from widgets.memory_strip import MemoryStrip
from widgets.models.graph_overlay import NONE_COLOR, OVERLAYS, NodeFigures, Painted, paint, stat_of
from widgets.models.graph_scene import (
    Scene,
    out_bytes,
    output_bytes,
    replaced_by,
    scene_from,
    tip,
    weight_bytes,
)

VIEWS = {"as run": "run", "as loaded": "loaded"}
DIM_CHARS = 8  # a symbolic dim longer than this is clipped on an edge


def short_shape(shape: list[int | str]) -> str:
    """A tensor shape as an edge shows it: 1×128×384; a long symbolic dim clipped."""
    dims = [str(d) if len(str(d)) <= DIM_CHARS else str(d)[: DIM_CHARS - 1] + "…" for d in shape]
    return "×".join(dims) or "scalar"


class GraphView(QWidget):
    node_selected = Signal(str)  # the run node picked (what the op table names); user only
    expand_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: dict[str, Any] | None = None
        self.scene_: Scene | None = None
        self.stats: dict[str, OpStat] = {}
        self.roofs: Roofs | None = None
        self.baseline: dict[str, OpStat] | None = None
        self.baseline_name = ""
        self.baseline_stand_in: dict[str, str] = {}
        self.painted = Painted()
        self.figures = NodeFigures({})
        self.picked = ""
        self.found: list[str] = []
        self.stand_in: dict[str, str] = {}
        self._fell_back = False  # shown as loaded because the last result had no graph as run

        self.view_combo = QComboBox()
        self.view_combo.addItems(list(VIEWS))
        self.view_combo.setToolTip(
            "As run: the graph the runtime executes after its fusion. "
            "As loaded: the model file's graph."
        )
        self.collapse_box = QCheckBox("Collapse repeats")
        self.collapse_box.setToolTip(
            "Each repetition of a repeated block (a transformer "
            "layer) as one box carrying its summed figures"
        )
        self.overlay_combo = QComboBox()
        self.overlay_combo.addItems(list(OVERLAYS))
        self.overlay_combo.setToolTip("What colours the nodes (the legend reads it)")
        self.search = QLineEdit()
        self.search.setPlaceholderText("find node or op type (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("Fit the whole graph in view (F)")
        self.expand_button = QPushButton("Expand")
        self.expand_button.setToolTip("Lay out every node (a large graph opens collapsed)")
        self.expand_button.hide()
        bar = self.bar = QHBoxLayout()  # a dock adds its own buttons at its end
        for w in (self.view_combo, self.collapse_box, QLabel("Overlay"), self.overlay_combo):
            bar.addWidget(w)
        bar.addWidget(self.search, 1)
        self.find_note = QLabel("")  # how many matches, or none
        bar.addWidget(self.find_note)
        bar.addWidget(self.expand_button)
        bar.addWidget(self.fit_button)
        self.canvas = GraphCanvas()
        self.canvas.tip_for = self._tip
        self.legend = QLabel("")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.note = QLabel("")
        for label in (self.legend, self.note):  # long words never widen the window
            label.setMinimumWidth(1)
        self.search.setMinimumWidth(60)
        foot = self.foot = QHBoxLayout()  # the legend, the view's counts and notes
        foot.addWidget(self.legend)
        foot.addWidget(self.note, 1)
        lay = QVBoxLayout()  # set once filled (tests/test_widget_items.py)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(bar)
        # the picked node's properties (as Netron's side panel): op, name, inputs and outputs
        # with dtypes and shapes, weights, attributes, its time
        self.props = QPlainTextEdit()
        self.props.setReadOnly(True)
        self.props.setPlaceholderText("pick a node: its inputs, outputs, weights, attributes")
        self.props.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.addWidget(self.canvas)
        self.split.addWidget(self.props)
        self.split.setStretchFactor(0, 4)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([800, 220])
        lay.addWidget(self.split, 1)
        self.strip = MemoryStrip()
        self.strip.hide()
        lay.addWidget(self.strip)
        lay.addLayout(foot)
        self.setLayout(lay)

        self.view_combo.currentTextChanged.connect(lambda _: self._rebuild())
        self.collapse_box.toggled.connect(lambda _: self._rebuild())
        self.overlay_combo.currentTextChanged.connect(lambda _: self._repaint())
        self.search.textChanged.connect(self._find)
        self.search.returnPressed.connect(self._next_found)
        self.fit_button.clicked.connect(lambda: self.canvas.fit())  # (not its `checked`)
        self.expand_button.clicked.connect(self.expand_requested)
        self.canvas.picked.connect(self._clicked)
        self.strip.picked.connect(self._strip_picked)
        QShortcut(QKeySequence.StandardKey.Find, self, self.search.setFocus)

    # data in ---------------------------------------------------------------------------
    def set_result(self, result: dict[str, Any] | None) -> None:
        """A graph job's result (None: no graph). The view and overlay chosen stay."""
        self.result = result
        self.stand_in = replaced_by(result) if result else {}
        has_run = bool(result and (result.get("views") or {}).get("run"))
        want = "as run" if has_run and self._fell_back else self.view_combo.currentText()
        if result is not None and not has_run and want == "as run":
            want, self._fell_back = "as loaded", True  # no graph as run: back when there is
        elif has_run:
            self._fell_back = False
        self.view_combo.blockSignals(True)
        self.view_combo.setCurrentText(want)
        self.view_combo.blockSignals(False)
        self._rebuild(fit=True)

    def node_memory(self) -> dict[str, tuple[float | None, float | None]]:
        """Each run node's output and weight bytes, for the op table's columns."""
        view = ((self.result or {}).get("views") or {}).get("run") or {}
        facts = {n["name"]: n for n in view.get("nodes", [])}
        tensors = {k: (v[0], v[1]) for k, v in view.get("tensors", {}).items()}
        out, weights = output_bytes(facts, tensors), weight_bytes(facts, tensors)
        return {n: (out.get(n), weights.get(n)) for n in facts}

    def set_figures(self, stats: list[OpStat], roofs: Roofs | None) -> None:
        """The live profile's per-node stats (run node names) and the machine's roofs."""
        self.stats = {s.name: s for s in stats}
        self.roofs = roofs
        self._repaint()

    def set_baseline(
        self, stats: list[OpStat] | None, name: str = "", stand_in: dict[str, str] | None = None
    ) -> None:
        """Another run's per-node stats for the 'change' overlay (None: none); with its
        graph's fused map (`stand_in`: loaded node -> its run node), the view as loaded
        compares the two runs node by node although their graphs as run differ (FP32 and
        INT8)."""
        self.baseline = {s.name: s for s in stats} if stats is not None else None
        self.baseline_name = name
        self.baseline_stand_in = dict(stand_in or {})
        self._repaint()

    # selection -------------------------------------------------------------------------
    def select_node(self, name: str) -> bool:
        """Pick `name` (a run node, as the op table names it) without emitting: in the view
        as loaded, the loaded nodes it replaced; in a collapsed view, its block."""
        scene = self.scene_
        if scene is None or not name:
            self._pick("")
            return False
        target = name
        if scene.kind == "loaded" and name not in self.canvas.items_by_name:
            origins = (self.result or {}).get("fused", {}).get(name) or []
            target = origins[-1] if origins else ""
        if target and target not in self.canvas.items_by_name:
            target = scene.block_of(target) or ""
        if not target:
            return False
        self._pick(target)
        self.canvas.centre_on(target)
        return True

    def _clicked(self, name: str) -> None:
        self._pick(name)
        if name:
            run_name = self.stand_in.get(name, name) if self._kind() == "loaded" else name
            self.node_selected.emit(run_name)

    def _pick(self, name: str) -> None:
        self.picked = name
        group = set(self._group(name))
        for n, item in self.canvas.items_by_name.items():
            item.mark = (
                PICKED if n == name else GROUP if n in group else FOUND if n in self.found else None
            )
            item.update()
        self.canvas.light_edges(self.scene_, name)
        self.strip.show_node(name)
        self.props.setPlainText(self._tip(name) if name else "")

    def _group(self, name: str) -> list[str]:
        """The nodes outlined with `name`: in the view as loaded, every node the same run
        node replaced; in the view as run, none (the tooltip lists them)."""
        if not name or self._kind() != "loaded":
            return []
        run = self.stand_in.get(name)
        return list((self.result or {}).get("fused", {}).get(run, [])) if run else []

    # drawing ---------------------------------------------------------------------------
    def _kind(self) -> str:
        return VIEWS[self.view_combo.currentText()]

    def _rebuild(self, fit: bool = True) -> None:
        result = self.result
        kind, collapsed = self._kind(), self.collapse_box.isChecked()
        scene = scene_from(result, kind, collapsed) if result else None
        note = ""
        if result and scene is None and not collapsed:  # too large: only its collapsed form
            scene = scene_from(result, kind, True)
            if scene is not None:
                self.collapse_box.blockSignals(True)
                self.collapse_box.setChecked(True)
                self.collapse_box.blockSignals(False)
        view = ((result or {}).get("views") or {}).get(kind) or {}
        self.collapse_box.setEnabled(bool(view.get("collapsed")))
        self.expand_button.setVisible(bool(view) and view.get("layout") is None)
        if scene is not None:
            note = scene.note
            if kind == "run" and result and result.get("as_run_error"):  # drawn, lacking
                note = f"{note} {result['as_run_error']}".strip()  # (its profiled run stopped)
        elif result and kind == "run" and result.get("pending"):  # the job goes on
            note = "the graph as run is still being made (the view as loaded is drawn)"
        elif result and kind == "run":
            note = f"no graph as run: {result.get('as_run_error') or 'not drawn'}"
        old = self.scene_
        same = bool(scene and old and (scene.kind, scene.names()) == (old.kind, old.names()))
        fit = fit and not same  # the same graph laid out again: the view stays where it is
        self.scene_ = scene
        keep = (
            self.canvas.transform(),
            self.canvas.mapToScene(self.canvas.viewport().rect().center()),
        )
        self.canvas.show_scene(scene, self._edge_shapes(scene, view))
        if same:
            self.canvas.setTransform(keep[0])
            self.canvas.centerOn(keep[1])
        self._note = note
        view_data = ((result or {}).get("views") or {}).get(kind) or {}
        self.strip.set_memory(view_data.get("memory") if scene is not None else None)
        self._repaint()
        self._pick(self.picked if self.picked in self.canvas.items_by_name else "")
        if fit:
            self.canvas.fit()
        if self.search.text():  # after the fit: a node found is centred on
            self._find(self.search.text())

    def _figures(self) -> NodeFigures:
        scene = self.scene_
        view = ((self.result or {}).get("views") or {}).get(self._kind()) or {}
        blocks = {n.name: n.members for n in scene.nodes if n.members} if scene else {}
        return NodeFigures(
            self.stats,
            self.roofs,
            precision=view.get("precision") or {},
            providers=view.get("providers") or {},
            out_bytes=out_bytes(scene) if scene else {},
            weight_bytes=weight_bytes(scene.facts, scene.tensors) if scene else {},
            stand_in=self.stand_in if self._kind() == "loaded" else {},
            blocks=blocks,
            baseline=self.baseline,
            baseline_name=self.baseline_name,
            baseline_stand_in=self.baseline_stand_in if self._kind() == "loaded" else {},
        )

    def _repaint(self) -> None:
        scene = self.scene_
        if scene is None:
            self.painted = Painted()
            self.legend.setText("")
            self.note.setText(getattr(self, "_note", ""))
            self.note.setToolTip(self.note.text())  # whole where the foot is too narrow
            return
        self.figures = self._figures()  # kept for hover text (not rebuilt per tooltip)
        self.painted = paint(self.overlay_combo.currentText(), scene.names(), self.figures)
        for name, item in self.canvas.items_by_name.items():
            item.fill = QColor(self.painted.colors.get(name, NONE_COLOR))
            item.value = self.painted.values.get(name, "")
            item.update()
        swatches = " ".join(
            f"<span style='background:{c}'>&nbsp;&nbsp;&nbsp;</span>&nbsp;{t}&nbsp;&nbsp;"
            for c, t in self.painted.legend
        )
        self.legend.setText(swatches)
        counts = f"{len(scene.nodes):,} boxes, {len(scene.edges):,} edges"
        words = [
            w for w in (getattr(self, "_note", ""), self.strip.summary, self.painted.note) if w
        ]
        self.note.setText(" · ".join([counts, *words]))
        self.note.setToolTip(self.note.text())  # whole where the foot is too narrow

    def _tip(self, name: str) -> str:
        scene = self.scene_
        if scene is None:
            return name
        f = self.figures
        stand = self.stand_in.get(name) if self._kind() == "loaded" else None
        fused = (
            list((self.result or {}).get("fused", {}).get(name, [])) if scene.kind == "run" else []
        )
        return tip(scene, name, stat_of(name, f), fused, stand, self.painted.values.get(name, ""))

    def _strip_picked(self, name: str) -> None:
        """A step of the memory strip clicked: its node (its block, when collapsed)."""
        target = name if name in self.canvas.items_by_name else None
        if target is None and self.scene_ is not None:
            target = self.scene_.block_of(name)
        if target:
            self._clicked(target)
            self.canvas.centre_on(target)

    def _edge_shapes(self, scene: Scene | None, view: dict[str, Any]) -> dict[tuple[str, str], str]:
        """Each drawn edge's tensor shape, short (symbolic dims clipped), where known."""
        if scene is None:
            return {}
        tensors = view.get("tensors") or {}
        out: dict[tuple[str, str], str] = {}
        for src, dst, tensor in view.get("edges") or []:
            shape = (tensors.get(tensor) or [None, None])[1]
            if shape is not None and (src, dst) not in out:
                out[(src, dst)] = short_shape(shape)
        return out

    def _find(self, text: str) -> None:
        """Nodes whose name or op type holds `text`; in a collapsed view, matches inside
        its blocks are shown: the view expanded when its full layout exists, else their
        blocks marked. None found is said."""
        scene = self.scene_
        self.found = scene.find(text) if scene else []
        t = text.strip().lower()
        if scene is not None and scene.collapsed and t:
            inside = [
                name
                for name, f in scene.facts.items()
                if name not in self.canvas.items_by_name
                and (t in name.lower() or t in str(f.get("op", "")).lower())
            ]
            view = ((self.result or {}).get("views") or {}).get(scene.kind) or {}
            if inside and view.get("layout") is not None:
                self.collapse_box.setChecked(False)  # its rebuild finds them again
                return
            blocks = [scene.block_of(n) for n in inside]
            self.found += [b for b in dict.fromkeys(blocks) if b and b not in self.found]
        n = len(self.found)
        self.find_note.setText(
            "" if not t else f"no match for {text.strip()!r}" if not n else f"{n} found"
        )
        self._pick(self.picked)
        if self.found:
            self.canvas.centre_on(self.found[0])

    def _next_found(self) -> None:
        if not self.found:
            return
        i = self.found.index(self.picked) + 1 if self.picked in self.found else 0
        name = self.found[i % len(self.found)]
        self._clicked(name)
        self.canvas.centre_on(name)

    # export ----------------------------------------------------------------------------
    def render_image(self, path: str) -> None:
        """The whole current view as SVG (by the suffix) or PNG."""
        scene = self.canvas.scene()
        rect = scene.sceneRect()
        if path.lower().endswith(".svg"):
            from PySide6.QtSvg import QSvgGenerator

            gen = QSvgGenerator()
            gen.setFileName(path)
            gen.setSize(QSize(int(rect.width()), int(rect.height())))
            gen.setViewBox(QRectF(0, 0, rect.width(), rect.height()))
            gen.setTitle("OpScope graph")
            painter = QPainter(gen)
            scene.render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
            painter.end()
            return
        scale = min(1.0, 8000.0 / max(rect.width(), rect.height(), 1.0))
        image = QImage(
            int(rect.width() * scale) + 1,
            int(rect.height() * scale) + 1,
            QImage.Format.Format_ARGB32,
        )
        image.fill(QColor("#ffffff"))
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        scene.render(painter, QRectF(image.rect()), rect)
        painter.end()
        if not image.save(path):
            raise OSError(f"{path}: the image could not be written")

    def explorer_values(self) -> Mapping[str, float | str]:
        """The overlay shown, on every node of the model file (the view as loaded, never
        collapsed): numbers where the overlay is a scale, labels where it names a kind."""
        view = ((self.result or {}).get("views") or {}).get("loaded") or {}
        facts = {n["name"]: n for n in view.get("nodes", [])}
        tensors = {k: (v[0], v[1]) for k, v in view.get("tensors", {}).items()}
        figures = NodeFigures(
            self.stats,
            self.roofs,
            precision=view.get("precision") or {},
            providers=view.get("providers") or {},
            out_bytes=output_bytes(facts, tensors),
            weight_bytes=weight_bytes(facts, tensors),
            stand_in=self.stand_in,
            baseline=self.baseline,
            baseline_name=self.baseline_name,
            baseline_stand_in=self.baseline_stand_in,
        )
        painted = paint(self.overlay_combo.currentText(), list(facts), figures)
        values: dict[str, float | str] = dict(painted.values)
        values.update(painted.numbers)
        return values
