"""The bottom floor: record types (``candidate``: Candidate; ``result``: EvalResult, Status,
TimingStats, TrialCheck) and the worker protocol (``protocol``). Standard library only; every
other package may import it and it imports none of them."""
