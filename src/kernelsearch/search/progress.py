"""Live progress of a run on the terminal (stderr): round, candidates evaluated, best speedup,
tokens and cost, plus one line per event so a log of the session remains."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from kernelsearch.records.result import EvalResult
from kernelsearch.search.budgets import Spent, Stop
from kernelsearch.search.ranking import pct_text

_STYLE = {"correct": "green", "incorrect": "red", "rejected": "magenta"}


class View:
    """What the driver reports; this base class shows nothing (library use, tests)."""

    def start(self, run_id: str, strategy: str, problem: str, spent: Spent, evaluated: int) -> None: ...
    def round_started(self, n: int, plan: dict[str, Any]) -> None: ...
    def proposed(self, n: int, candidates: int, spent: Spent) -> None: ...
    def evaluating(self, n: int, count: int) -> None: ...
    def evaluated(self, n: int, candidate_id: str, result: EvalResult | None, spent: Spent, evaluated: int,
                  speedup: float | None = None, held_out: bool = False, basis: str = "") -> None: ...
    def stopped(self, stop: Stop, spent: Spent, evaluated: int) -> None: ...
    def close(self) -> None: ...


def _status_line(n: int | None, spent: Spent, evaluated: int) -> Text:
    best = f"{spent.best_speedup:.2f}x" if spent.best_speedup is not None else "-"
    if spent.best_speedup is not None and spent.best_basis:
        best += f" ({spent.best_basis})"  # what the figure is: ranking.Figure.short
    return Text.assemble(
        ("round ", "dim"), (str(n) if n is not None else "-", "bold"),
        ("  evaluated ", "dim"), (str(evaluated), "bold"),
        ("  best ", "dim"), (best, "bold green" if spent.best_speedup else "bold"),
        *((("  floor ", "dim"), (pct_text(spent.best_pct_of_floor), "bold")) if spent.best_pct_of_floor else ()),
        *((("  held out ", "dim"), (str(spent.held_out), "bold yellow")) if spent.held_out else ()),
        ("  tokens ", "dim"), (f"{spent.tokens:,}", "bold"),
        ("  cost ", "dim"), (f"${spent.cost_usd:.4f}", "bold"),
        ("  time ", "dim"), (f"{spent.elapsed_s:.0f}s", "bold"),
    )


class RichView(View):
    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.round: int | None = None
        self._last_status = ""
        self._live: Live | None = None
        if self.console.is_terminal:
            self._live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()

    def _status(self, spent: Spent, evaluated: int) -> None:
        if self._live is not None:
            self._live.update(_status_line(self.round, spent, evaluated))

    def _print(self, *parts: Any) -> None:
        self.console.print(*parts, highlight=False)

    def start(self, run_id: str, strategy: str, problem: str, spent: Spent, evaluated: int) -> None:
        self._print(f"[bold]run {run_id}[/] · {strategy} on {escape(problem)}")
        self._status(spent, evaluated)

    def round_started(self, n: int, plan: dict[str, Any]) -> None:
        self.round = n
        self._print(f"[bold]round {n}[/]: proposing")

    def proposed(self, n: int, candidates: int, spent: Spent) -> None:
        self.round = n
        self._print(f"round {n}: {candidates} candidate(s) proposed · {spent.tokens:,} tokens · ${spent.cost_usd:.4f}")

    def evaluating(self, n: int, count: int) -> None:
        self.round = n
        self._print(f"round {n}: evaluating {count} candidate(s)")

    def evaluated(self, n: int, candidate_id: str, result: EvalResult | None, spent: Spent, evaluated: int,
                  speedup: float | None = None, held_out: bool = False, basis: str = "") -> None:
        """``speedup``: the kernel's figure (search.report.figure), ``basis`` what it is (its
        short label); ``held_out``: correct, but kept out of the ranking as PyTorch's work."""
        if result is not None:
            style = _STYLE.get(result.status.value, "yellow")
            sp = f" {speedup:.2f}x" + (f" ({basis})" if basis else "") if speedup is not None else ""
            held = " [yellow]held out (torch_fallback: PyTorch did the work)[/]" if held_out else ""
            self._print(f"  {candidate_id} [{style}]{result.status.value}[/]{sp}{held}  "
                        f"[dim]{escape(result.reason[:90])}[/]")
        self._print_status(n, spent, evaluated)
        self._status(spent, evaluated)

    def _print_status(self, n: int | None, spent: Spent, evaluated: int) -> None:
        line = _status_line(n, spent, evaluated)
        if line.plain != self._last_status:
            self._print(line)
            self._last_status = line.plain

    def stopped(self, stop: Stop, spent: Spent, evaluated: int) -> None:
        self.close()
        self._print_status(self.round, spent, evaluated)
        self._print(f"[bold]{stop.status}[/]: {stop.reason}" + escape(f" ({stop.detail})" if stop.detail else ""))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
