"""Verification: run an artifact and its live function on the same inputs and compare the results."""
