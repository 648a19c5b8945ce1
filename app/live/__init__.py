"""The live run: config and inputs panels and their controllers."""
