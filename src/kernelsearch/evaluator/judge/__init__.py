"""Judge: the worker role that runs only the reference and compares the candidate's outputs."""
