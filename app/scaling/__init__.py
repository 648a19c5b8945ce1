"""The Scaling dock: sweeps over input sizes and their growth fits."""
