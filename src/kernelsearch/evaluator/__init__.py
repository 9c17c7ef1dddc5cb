"""The evaluator: screen, build, check and time one candidate in isolated worker processes."""
