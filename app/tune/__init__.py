"""The Tune dock: trials, the Pareto front, the best config."""
