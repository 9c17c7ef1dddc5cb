"""Verdict and records: the parent's checks on what the workers report, and the results."""
