"""A run's settings, stored as JSON in the run's row so that a resume, possibly on another
machine, continues with exactly the settings the run started with."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from kernelsearch.evaluator.config import EvalConfig, Limits, TimingConfig
from kernelsearch.playbook.notes import MODES as PLAYBOOK_MODES
from kernelsearch.records.choices import check_choice
from kernelsearch.search.ranking import FALLBACK_POLICIES

STRATEGIES = ("single", "best-of-n", "refine", "branch", "evolve")
DEVICE_BACKEND = {"cpu": "cpp", "cuda": "cuda"}


@dataclass(frozen=True)
class Budgets:
    """Limits on a run; the first one reached stops it. None means no limit."""

    rounds: int | None = None  # LLM rounds (the seed round does not count)
    candidates: int | None = None  # candidates proposed by the model
    tokens: int | None = None  # input + output tokens of answered calls
    cost_usd: float | None = None
    wall_s: float | None = None  # active time, summed over every session of the run
    target_speedup: float | None = None  # stop once a correct kernel is this much faster than eager
    target_floor_pct: float | None = None  # stop once a correct kernel reaches this % of the roofline floor


@dataclass(frozen=True)
class StrategyParams:
    n: int = 4  # best-of-n samples; refine chains; evolve children per round
    top_k: int = 2  # branch: seeds per round
    num_ideas: int = 3  # branch: ideas asked per seed
    realisations: int = 2  # branch: implementations per idea
    crossover_rate: float = 0.5  # evolve: share of children made by crossover
    explore: float = 0.2  # evolve: share of the parent choice spread evenly over members
    reuse_penalty: float = 0.5  # evolve: weight divided by (1 + penalty * times used)
    seed: int = 0  # the search's own random choices (evolve parents)


@dataclass(frozen=True)
class RunConfig:
    strategy: str
    llm: str  # provider spec, e.g. openai:gpt-4o
    problem_name: str
    backend: str
    hardware: str = ""
    temperature: float = 0.7
    max_tokens: int = 8192
    llm_timeout: float | None = None  # provider request timeout (exchange: how long to wait)
    base_url: str | None = None
    api_key_env: str | None = None
    llm_jobs: int = 4  # parallel LLM requests (exchange: all at once; replay: one at a time)
    build_jobs: int | None = None  # parallel builds before a round is evaluated
    prompts_dir: str | None = None
    prices: str | None = None
    params: StrategyParams = field(default_factory=StrategyParams)
    budgets: Budgets = field(default_factory=Budgets)
    eval: EvalConfig = field(default_factory=EvalConfig)
    # kernels marked torch_fallback (PyTorch did the work): "mark" holds them out of the run's
    # ranking (best, parents, verify, export), "allow" ranks them, "reject" has the evaluator
    # reject them (search.ranking.eligible_sql is the rule)
    torch_fallback: str = "mark"
    # technique notes (kernelsearch.playbook) chosen per prompt: "on" (with an exemplar's source in
    # prompts that ask for code), "notes" (exemplars only cited) or "off"
    playbook: str = "on"

    def __post_init__(self) -> None:
        check_choice("RunConfig", "strategy", self.strategy, STRATEGIES)
        check_choice("RunConfig", "playbook", self.playbook, PLAYBOOK_MODES)
        check_choice("RunConfig", "torch_fallback", self.torch_fallback, FALLBACK_POLICIES)
        # the evaluator knows mark and reject; either side asking for reject means reject
        # (a run stored before this field existed has only eval.torch_fallback)
        if "reject" in (self.torch_fallback, self.eval.torch_fallback):
            object.__setattr__(self, "torch_fallback", "reject")
            if self.eval.torch_fallback != "reject":
                object.__setattr__(self, "eval", replace(self.eval, torch_fallback="reject"))

    def with_(self, **changes: Any) -> RunConfig:
        return replace(self, **changes)

    def provider_options(self) -> dict[str, Any]:
        """Constructor options for the provider named by `llm` (only those it takes)."""
        scheme = self.llm.partition(":")[0].strip().lower()
        opts: dict[str, Any] = {}
        if self.llm_timeout is not None and scheme in ("openai", "anthropic", "exchange"):
            opts["timeout"] = self.llm_timeout
        if scheme in ("openai", "anthropic"):
            if self.base_url:
                opts["base_url"] = self.base_url
            if self.api_key_env:
                opts["api_key_env"] = self.api_key_env
        return opts

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        ev = asdict(self.eval)
        ev.pop("home")  # machine-specific: the evaluating machine uses its own
        d["eval"] = ev
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunConfig:
        d = dict(d)
        ev = dict(d.pop("eval"))
        timing, limits = TimingConfig(**ev.pop("timing")), Limits(**ev.pop("limits"))
        if "precision" not in ev:  # a run made before the precision modes keeps the tolerance it was run at
            ev["atol"] = 1e-2 if ev.get("atol") is None else ev["atol"]
            ev["rtol"] = 1e-2 if ev.get("rtol") is None else ev["rtol"]
        known = {f.name for f in fields(cls)}
        d.setdefault("playbook", "off")  # a run made before the playbook keeps the prompts it had
        return cls(
            **{k: v for k, v in d.items() if k in known and k not in ("params", "budgets")},
            params=StrategyParams(**d.get("params", {})),
            budgets=Budgets(**d.get("budgets", {})),
            eval=EvalConfig(timing=timing, limits=limits, **ev),
        )
