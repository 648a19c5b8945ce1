"""Pure measurement maths: latency statistics, accuracy, op traces and their statistics,
FLOPs, the roofline and op families."""
