"""Provider specs and option checking."""

from __future__ import annotations

import pytest

from kernelsearch.llm.base import LLMError, LLMRequest, LLMResponse, Message, Provider
from kernelsearch.llm.client import make_client
from kernelsearch.llm.providers.exchange import ExchangeProvider
from kernelsearch.llm.providers.replay import ReplayProvider
from kernelsearch.llm.registry import make_provider, register_provider, schemes


def test_builtin_schemes(tmp_path):
    f = tmp_path / "r.jsonl"
    f.write_text('{"content": "hi"}\n')
    assert isinstance(make_provider(f"replay:{f}", model="gpt-4o"), ReplayProvider)
    ex = make_provider(f"EXCHANGE:{tmp_path / 'ex'}", timeout=0)
    assert isinstance(ex, ExchangeProvider) and ex.timeout == 0
    assert {"openai", "anthropic", "exchange", "replay"} <= set(schemes())


def test_openai_and_anthropic_specs_build_without_network():
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    o = make_provider("openai:gpt-4o", api_key="sk-x")
    assert o.model == "gpt-4o" and o.max_tokens_param == "max_completion_tokens"
    local = make_provider("openai:qwen", base_url="http://127.0.0.1:8000/v1")
    assert local.max_tokens_param == "max_tokens"
    assert make_provider("anthropic:claude-sonnet-4", api_key="k").model == "claude-sonnet-4"


def test_bad_specs_and_options(tmp_path):
    with pytest.raises(LLMError, match="unknown provider"):
        make_provider("gemini:pro")
    with pytest.raises(LLMError, match="SCHEME:TARGET"):
        make_provider("openai")
    with pytest.raises(LLMError, match="bad options"):
        make_provider(f"exchange:{tmp_path}", tiemout=3)


def test_register_custom_scheme_and_make_client(tmp_path):
    class Echo(Provider):
        name = "echo"

        def __init__(self, target: str, prefix: str = "") -> None:
            self.model = target
            self.prefix = prefix

        def complete(self, request: LLMRequest) -> LLMResponse:
            return LLMResponse(content=self.prefix + request.messages[-1].content)

    register_provider("echo", Echo)
    client = make_client("echo:m1", prefix="> ", cache_path=str(tmp_path / "c.sqlite"))
    req = client.request("hello", system="sys", temperature=0.5)
    assert req.model == "m1" and req.messages[0] == Message("system", "sys")
    assert client.complete(req).content == "> hello"
    assert client.complete(req).cached
