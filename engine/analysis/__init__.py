"""Reading recorded runs: comparison statistics, run comparison, report, export."""
