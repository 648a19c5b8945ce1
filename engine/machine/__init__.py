"""This machine: system facts, measured peaks, CPU and GPU telemetry."""
