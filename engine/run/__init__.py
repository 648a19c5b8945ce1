"""Running work: the timing loop, one bench run, the live run and the engine host process."""
