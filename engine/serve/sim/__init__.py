"""The serving simulator: its event loops (open and closed), its service model calibrated
on the real serving loop (batch times, idle cost, lateness, slow stretches), the questions
answered on it (capacity search, What if) and a real run held against its prediction."""
