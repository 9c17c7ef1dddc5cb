"""What a call cost, in USD, from token counts and a per-million-token price table.

DEFAULT_PRICES are editable defaults copied from the vendors' public price lists; prices
change, so check them and override what is stale with a JSON file (`path=` or the
KERNELSEARCH_PRICES env var)::

    {"my-model": {"input": 0.5, "output": 1.5}, "local-qwen": [0, 0]}

(USD per million input / output tokens). A model not in the table costs None, not 0:
an unknown price must not pass for a free call. Model names match exactly, after dropping a
router prefix ("anthropic/claude-...") and a date or "-latest" suffix.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kernelsearch.llm.base import LLMError, Usage

PRICES_ENV = "KERNELSEARCH_PRICES"


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok
        ) / 1e6


# Editable defaults (USD per million tokens, standard tier, no prompt-cache discounts).
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-5": Price(1.25, 10.00),
    "gpt-5-mini": Price(0.25, 2.00),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "claude-opus-4": Price(15.00, 75.00),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "claude-3-5-sonnet": Price(3.00, 15.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
    "deepseek-chat": Price(0.27, 1.10),
    "deepseek-reasoner": Price(0.55, 2.19),
}

_SUFFIX = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest|@\d{8})$")


def _price(value: object, where: str) -> Price:
    if isinstance(value, Mapping):
        i = value.get("input", value.get("input_per_mtok"))
        o = value.get("output", value.get("output_per_mtok"))
    elif isinstance(value, (list, tuple)) and len(value) == 2:
        i, o = value
    else:
        i = o = None
    try:
        if i is None or o is None:
            raise TypeError("need input and output prices")
        return Price(float(i), float(o))
    except (TypeError, ValueError) as e:
        raise LLMError(
            f'pricing: {where}: expected {{"input": X, "output": Y}} or [X, Y] (USD per '
            f"million tokens), got {value!r}"
        ) from e


def load_price_file(path: str | os.PathLike[str]) -> dict[str, Price]:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise LLMError(f"pricing: cannot read price file {p}: {e}") from e
    if not isinstance(data, dict):
        raise LLMError(f"pricing: price file {p} must hold a JSON object of model -> price")
    return {str(name).lower(): _price(v, f"{p}: {name}") for name, v in data.items()}


class PriceTable:
    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        source = DEFAULT_PRICES if prices is None else prices
        self.prices: dict[str, Price] = {k.lower(): v for k, v in source.items()}

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, use_env: bool = True) -> PriceTable:
        """Defaults, then the KERNELSEARCH_PRICES file, then `path`: later entries win."""
        table = cls()
        env_path = os.environ.get(PRICES_ENV) if use_env else None
        for p in (env_path, path):
            if p:
                table.prices.update(load_price_file(p))
        return table

    def lookup(self, model: str | None) -> Price | None:
        if not model:
            return None
        name = model.strip().lower()
        for candidate in (name, name.rsplit("/", 1)[-1]):
            if candidate in self.prices:
                return self.prices[candidate]
            base = _SUFFIX.sub("", candidate)
            if base in self.prices:
                return self.prices[base]
        return None

    def cost(self, model: str | None, usage: Usage) -> float | None:
        price = self.lookup(model)
        return None if price is None else price.cost(usage)


@functools.lru_cache(maxsize=8)
def _default_table(env_path: str | None) -> PriceTable:
    return PriceTable.load()


def cost(model: str | None, usage: Usage, table: PriceTable | None = None) -> float | None:
    """USD for `usage` on `model`, None when the model's price is unknown."""
    table = table or _default_table(os.environ.get(PRICES_ENV))
    return table.cost(model, usage)
