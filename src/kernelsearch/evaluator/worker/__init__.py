"""Candidate worker: the worker process, the candidate's role in it, the checks on each call."""
