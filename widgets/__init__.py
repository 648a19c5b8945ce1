"""Reusable views of engine data: latency plot, op table, telemetry strip, accuracy badge.

They draw what they are handed and never start engine work (no onnxruntime here).
"""

from widgets.accuracy_badge import AccuracyBadge
from widgets.latency_plot import LatencyPlot
from widgets.op_table import OpTable, OpTableModel
from widgets.telemetry_strip import TelemetryStrip

__all__ = ["AccuracyBadge", "LatencyPlot", "OpTable", "OpTableModel", "TelemetryStrip"]
