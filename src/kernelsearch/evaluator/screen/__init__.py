"""Screen: static rules over a candidate's source, read before anything runs."""
