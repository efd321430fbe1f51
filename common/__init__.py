"""Leaf modules that storage/, services/ and handlers/ may all import: domain errors, ids and timestamps.
They import nothing of Parley's own."""
