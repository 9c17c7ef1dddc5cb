"""``kernelsearch audit SOURCE``: judge a published set of kernels against its claims."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add_audit_command(sub: Any, add_eval_options: Callable[[argparse.ArgumentParser], None],
                      make_config: Callable[..., Any], open_archive: Callable[[argparse.Namespace], Any]
                      ) -> None:
    """The ``audit`` subcommand; ``main`` hands in bench's evaluation options, the config built
    from them and the archive opener (this module does not import ``main``: no cycle)."""
    from kernelsearch.cli.executor_opts import add_executor_options

    p = sub.add_parser(
        "audit", conflict_handler="resolve",
        help="judge a published set of kernels (a directory of pairs or JSON/JSONL rows) against its claims")
    p.add_argument("source", type=Path,
                   help="a directory with problems/NAME.py and solutions/NAME.py (claims in claims.json), or a "
                        "JSON / JSONL file of rows carrying the reference, the kernel and the claimed speedup")
    p.add_argument("--fields", default=None, metavar="KEY=FIELD,...",
                   help="the rows' field names: name (several joined with +, e.g. name=level_id+task_id), ref, "
                        "kernel, claimed, claimed_compile (default: those names themselves)")
    p.add_argument("--state", type=Path, default=None, metavar="DIR",
                   help="where judged rows (rows.jsonl) and the rows' files go; a rerun skips what it holds "
                        "(default: next to -o as FILE.state, else $KERNELSEARCH_HOME/audit/SOURCE_NAME)")
    p.add_argument("-o", "--output", type=Path, default=None, help="also write a self-contained HTML report")
    p.add_argument("--only", default=None, metavar="NAME,...", help="audit only these kernels")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="audit the first N (after --only/--sample)")
    p.add_argument("--sample", type=int, default=None, metavar="K", help="audit a random sample of K kernels")
    p.add_argument("--chunk", type=int, default=8, metavar="N",
                   help="kernels evaluated (and confirmed) together; a failing kernel's row is saved at once, a "
                        "correct one's once its chunk is confirmed (default 8)")
    p.add_argument("--no-lint", action="store_true", help="skip the problem linter")
    p.add_argument("--report-only", action="store_true",
                   help="evaluate nothing: report the kernels the state holds (judged on another machine, say) "
                        "and list the others as not judged")
    p.add_argument("--confirm", type=int, default=3, metavar="N",
                   help="time each correct kernel again in N fresh processes (default 3; 0: the single evaluation)")
    p.add_argument("-j", "--jobs", "--build-jobs", dest="jobs", type=int, default=None,
                   help="parallel builds (default: the cores no evaluation lane reserves)")
    add_executor_options(p)
    add_eval_options(p)
    # --seed (from the evaluation options) is the evaluation's, as on every command
    p.add_argument("--sample-seed", type=int, default=0, metavar="S",
                   help="seed of --sample (default 0): the same seed, the same sample")
    p.set_defaults(func=cmd_audit, make_config=make_config, open_archive=open_archive)


def cmd_audit(args: argparse.Namespace) -> int:
    from kernelsearch.audit.render import print_audit, to_json, write_html
    from kernelsearch.audit.run import AuditState, Options, default_state, run_audit, summarise
    from kernelsearch.audit.sources import SourceError, materialise, read_source, select
    from kernelsearch.cli.common import UsageError
    from kernelsearch.cli.executor_opts import executor_options

    for opt in ("limit", "sample", "chunk"):
        v = getattr(args, opt)
        if v is not None and v < (1 if opt == "chunk" else 0):
            raise UsageError(f"--{opt} must be at least {1 if opt == 'chunk' else 0}")
    if args.confirm < 0:
        raise UsageError("--confirm must be at least 0")
    config = args.make_config(args, check_device=not args.report_only)
    try:
        ex_opts = executor_options(args)
    except ValueError as e:
        raise UsageError(str(e)) from e
    state_dir = args.state or default_state(args.source, args.output)
    try:
        entries = read_source(args.source, args.fields)
    except SourceError as e:
        raise UsageError(str(e)) from e
    only = [s.strip() for s in (args.only or "").split(",") if s.strip()]
    if only and (unknown := sorted(set(only) - {e.name for e in entries})):
        raise UsageError(f"--only: no kernel named {', '.join(unknown[:5])} in {args.source}")
    entries = materialise(select(entries, only, args.sample, args.sample_seed, args.limit), state_dir)
    state = AuditState(state_dir)
    opts = Options(jobs=args.jobs, executor=args.executor, executor_options=ex_opts, confirm=args.confirm,
                   chunk=args.chunk, lint=not args.no_lint, evaluate=not args.report_only)
    with args.open_archive(args) as archive:
        rows = run_audit(entries, config, archive, state, opts)
    summary = summarise(rows, config.device)
    summary["state"] = str(state_dir)
    title = args.source.name
    if args.output is not None:
        path = write_html(summary, rows, f"audit of {title}", args.output)
        print(f"kernelsearch: audit: wrote {path}", file=sys.stderr)
    if args.json:
        print(to_json(summary, rows))
    else:
        print_audit(summary, rows, title)
    return 0

