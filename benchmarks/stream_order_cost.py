"""What the CUDA stream-order check (evaluator/worker/streams.py) costs an evaluation: each
candidate is evaluated ``--repeats`` times with the check and once without, and the seconds the
candidate's worker spent in its "stream order" phase (by the parent's clock, ``phase_s``) are
printed with the verdict and the median time, one JSON line per evaluation. Usage (GPU)::

    python benchmarks/stream_order_cost.py PROBLEM CANDIDATE [CANDIDATE ...] --repeats 2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kernelsearch.evaluator.config import EvalConfig
from kernelsearch.evaluator.evaluate import evaluate
from kernelsearch.problems.loader import load_problem
from kernelsearch.records.candidate import Candidate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("problem")
    ap.add_argument("candidates", nargs="+")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    p = Path(args.problem)
    problem = load_problem(p) if p.is_file() else load_problem(args.problem)
    base = EvalConfig(device="cuda", compile_baseline=False, profile=False)
    for path in args.candidates:
        cand = Candidate.from_file(Path(path))
        for check in [True] * args.repeats + [False]:
            r = evaluate(problem, cand, base.with_(stream_check=check))
            print(json.dumps({
                "candidate": Path(path).name, "stream_check": check, "status": r.status.value,
                "reason": r.reason[:160], "stream_order_s": r.phase_s.get("candidate stream order"),
                "candidate_run_s": r.phase_s.get("candidate run"), "eval_s": round(r.eval_s or 0.0, 2),
                "median_ms": r.candidate_ms,
            }), flush=True)


if __name__ == "__main__":
    main()
