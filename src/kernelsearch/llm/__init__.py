"""The LLM layer: ask a model for ideas and kernels, reliably and cheaply.

`make_client("openai:gpt-4o", cache_path=...)` gives an `LLMClient`; prompts come from
`prompts.PromptLibrary`, answers are read with `extract.extract_code` / `read_ideas`.
"""

from kernelsearch.llm.base import (
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    PendingResponse,
    Provider,
    TransientLLMError,
    Usage,
)
from kernelsearch.llm.cache import MemoryCache, SQLiteCache
from kernelsearch.llm.client import Budget, BudgetExceeded, LLMClient, Totals, make_client
from kernelsearch.llm.extract import (
    ExtractResult,
    Idea,
    IdeasResult,
    extract_code,
    extract_ideas,
    read_ideas,
)
from kernelsearch.llm.pricing import PriceTable, cost
from kernelsearch.llm.registry import make_provider, register_provider
from kernelsearch.llm.retry import RetryPolicy

__all__ = [
    "Budget",
    "BudgetExceeded",
    "ExtractResult",
    "Idea",
    "IdeasResult",
    "LLMClient",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "MemoryCache",
    "Message",
    "PendingResponse",
    "PriceTable",
    "Provider",
    "RetryPolicy",
    "SQLiteCache",
    "Totals",
    "TransientLLMError",
    "Usage",
    "cost",
    "extract_code",
    "extract_ideas",
    "make_client",
    "make_provider",
    "read_ideas",
    "register_provider",
]
