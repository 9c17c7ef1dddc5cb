"""Timing: the timed loop both roles run, the device's ceilings, profiler feedback."""
