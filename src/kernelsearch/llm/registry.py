"""Build a provider from a spec string such as `openai:gpt-4o` or `exchange:runs/ask`.

Provider modules are imported on demand, so `replay:` and `exchange:` work without the
vendor SDKs installed. `register_provider` adds a scheme.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from kernelsearch.llm.base import LLMError, Provider

# scheme -> (module, class); the part after "scheme:" is the class's first argument.
_BUILTIN: dict[str, tuple[str, str]] = {
    "openai": ("kernelsearch.llm.providers.openai_chat", "OpenAIProvider"),
    "anthropic": ("kernelsearch.llm.providers.anthropic_messages", "AnthropicProvider"),
    "exchange": ("kernelsearch.llm.providers.exchange", "ExchangeProvider"),
    "replay": ("kernelsearch.llm.providers.replay", "ReplayProvider"),
}
_CUSTOM: dict[str, Callable[..., Provider]] = {}


class ProviderSpecError(LLMError):
    """The spec or its options name no provider (a usage error, unlike a provider that cannot start)."""


def register_provider(scheme: str, factory: Callable[..., Provider]) -> None:
    """`factory(target, **options)` is called for specs `scheme:target`."""
    _CUSTOM[scheme.lower()] = factory


def schemes() -> list[str]:
    return sorted({*_BUILTIN, *_CUSTOM})


def _factory(scheme: str) -> Callable[..., Provider]:
    if scheme in _CUSTOM:
        return _CUSTOM[scheme]
    module_name, class_name = _BUILTIN[scheme]
    return getattr(importlib.import_module(module_name), class_name)


def make_provider(spec: str, **options: Any) -> Provider:
    """`scheme:target` -> Provider. Options go to the provider's constructor."""
    scheme, sep, target = spec.partition(":")
    scheme = scheme.strip().lower()
    if not sep or not target.strip():
        raise ProviderSpecError(
            f"provider spec {spec!r} should look like SCHEME:TARGET ({', '.join(schemes())})"
        )
    if scheme not in _BUILTIN and scheme not in _CUSTOM:
        raise ProviderSpecError(f"unknown provider {scheme!r} in {spec!r}; known: {', '.join(schemes())}")
    factory = _factory(scheme)
    try:
        inspect.signature(factory).bind(target.strip(), **options)
    except TypeError as e:
        raise ProviderSpecError(f"provider {scheme!r}: bad options {sorted(options)}: {e}") from e
    except ValueError:  # no signature available: let the call itself complain
        pass
    try:
        return factory(target.strip(), **options)
    except ImportError as e:
        raise LLMError(
            f"provider {scheme!r} needs a package that is not installed ({e.name}): "
            f"pip install {e.name or scheme}"
        ) from e
