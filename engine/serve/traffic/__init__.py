"""Traffic: when requests arrive and what they ask for (schedules from specs), and the
production traces replayed as traffic (CSV traces and their formats)."""
