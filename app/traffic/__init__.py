"""The Traffic dock: load runs, the What-if view, the SLO."""
