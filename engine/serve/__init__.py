"""Serving under traffic: an open-loop traffic generator, a dynamic batcher with Triton's
semantics, a response cache, the real serving loop over a backend's `Prepared`, and a
discrete-event simulator of the same batcher fed by the same traffic and counted by the
same statistics, so that a difference between them is a difference in the service model."""
