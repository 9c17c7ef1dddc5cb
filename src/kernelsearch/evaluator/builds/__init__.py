"""Build: candidates compiled ahead of their evaluation, into a cache shared across runs."""
