"""The `opscope` command line over the engine (no Qt)."""
