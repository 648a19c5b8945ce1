"""Reusable views of engine data: latency plot, op table, roofline, telemetry strip,
accuracy badge (one module each), and `widgets.models`, their Qt-free data.

They draw what they are handed and never start engine work (no onnxruntime here). Nothing
is imported here, so that `widgets.models` loads without Qt.
"""
