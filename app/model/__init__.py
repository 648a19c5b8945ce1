"""The model, seen: where its memory goes (the Memory dock); its graph will join it."""
