"""The live run: config and inputs panels, their controllers, the Runs dock."""
