"""The tuner: a space of configs searched on the real engine (every trial an honest
`opscope bench` in its own process, recorded in the session), the Pareto fronts, and the
best config that meets the constraints. Exhaustive, or optuna within a budget."""
