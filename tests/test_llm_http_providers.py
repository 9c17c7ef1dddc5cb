"""The openai and anthropic providers, through their real SDKs, against a local fake server."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kernelsearch.llm.base import LLMError, LLMRequest, Message, TransientLLMError
from kernelsearch.llm.client import LLMClient
from kernelsearch.llm.pricing import Price, PriceTable
from kernelsearch.llm.registry import make_provider
from kernelsearch.llm.retry import RetryPolicy

pytest.importorskip("openai")
pytest.importorskip("anthropic")


def _openai_ok(body: dict) -> dict:
    last = body["messages"][-1]["content"]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"echo: {last}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _anthropic_ok(body: dict) -> dict:
    last = body["messages"][-1]["content"]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": f"echo: {last}"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 13, "output_tokens": 5},
    }


class FakeAPI:
    """Answers /v1/chat/completions and /v1/messages; `script` queues failures first."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict, dict, float]] = []
        self.seen: list[tuple[str, dict, dict]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                api.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if api.script:
                    status, payload, headers, delay = api.script.pop(0)
                    time.sleep(delay)
                elif self.path.endswith("/chat/completions"):
                    status, payload, headers = 200, _openai_ok(body), {}
                elif self.path.endswith("/messages"):
                    status, payload, headers = 200, _anthropic_ok(body), {}
                else:
                    status, payload, headers = 404, {"error": {"message": "no such path"}}, {}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def fail(self, status: int, payload: dict, headers: dict | None = None, delay: float = 0.0):
        self.script.append((status, payload, headers or {}, delay))


@pytest.fixture
def api(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    fake = FakeAPI()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def _request(model: str, temperature: float = 0.0) -> LLMRequest:
    return LLMRequest(
        model=model,
        messages=(Message("system", "be brief"), Message("user", "hello")),
        temperature=temperature,
        max_tokens=64,
    )


def _openai(api: FakeAPI, **kw):
    return make_provider("openai:test-model", base_url=api.url + "/v1", api_key="sk-test", **kw)


def _anthropic(api: FakeAPI, **kw):
    return make_provider("anthropic:claude-test", base_url=api.url, api_key="sk-ant-test", **kw)


def _client(provider, sleeps: list[float]) -> LLMClient:
    table = PriceTable({"test-model": Price(1.0, 2.0), "claude-test": Price(3.0, 15.0)})
    return LLMClient(provider, retry=RetryPolicy(sleep=sleeps.append, jitter=0.0), pricing=table)


def test_openai_chat_completion(api):
    provider = _openai(api)
    r = _client(provider, []).complete(_request("test-model", temperature=0.7))
    assert r.content == "echo: hello"
    assert (r.usage.input_tokens, r.usage.output_tokens) == (11, 7)
    assert r.cost_usd == pytest.approx((11 * 1.0 + 7 * 2.0) / 1e6)
    assert r.provider == "openai" and r.model == "test-model" and r.finish_reason == "stop"
    path, headers, body = api.seen[0]
    assert path == "/v1/chat/completions"
    assert headers["authorization"] == "Bearer sk-test"
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello"},
    ]
    assert body["temperature"] == 0.7 and body["max_tokens"] == 64


def test_openai_retries_500_then_succeeds(api):
    api.fail(500, {"error": {"message": "boom", "type": "server_error"}})
    sleeps: list[float] = []
    r = _client(_openai(api), sleeps).complete(_request("test-model"))
    assert r.content == "echo: hello"
    assert len(api.seen) == 2 and sleeps == [1.0]


def test_openai_429_honours_retry_after(api):
    api.fail(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after": "7"})
    sleeps: list[float] = []
    r = _client(_openai(api), sleeps).complete(_request("test-model"))
    assert r.content == "echo: hello"
    assert sleeps == [7.0]


def test_openai_bad_request_is_not_retried(api):
    api.fail(400, {"error": {"message": "bad model", "type": "invalid_request_error"}})
    sleeps: list[float] = []
    with pytest.raises(LLMError) as info:
        _client(_openai(api), sleeps).complete(_request("test-model"))
    assert not isinstance(info.value, TransientLLMError)
    assert "400" in str(info.value) and sleeps == []


def test_openai_timeout_and_connection_errors_are_transient(api):
    api.fail(200, {}, delay=1.0)
    with pytest.raises(TransientLLMError):
        _openai(api, timeout=0.2).complete(_request("test-model"))
    api.server.shutdown()
    api.server.server_close()
    with pytest.raises(TransientLLMError):
        _openai(api).complete(_request("test-model"))


def test_anthropic_messages(api):
    provider = _anthropic(api)
    r = _client(provider, []).complete(_request("claude-test", temperature=0.5))
    assert r.content == "echo: hello"
    assert (r.usage.input_tokens, r.usage.output_tokens) == (13, 5)
    assert r.cost_usd == pytest.approx((13 * 3.0 + 5 * 15.0) / 1e6)
    assert r.finish_reason == "end_turn"
    path, headers, body = api.seen[0]
    assert path == "/v1/messages"
    # SDK versions differ in how they send the key (x-api-key or a bearer token).
    assert "sk-ant-test" in headers.get("x-api-key", "") + headers.get("authorization", "")
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert body["temperature"] == 0.5 and body["max_tokens"] == 64


def test_anthropic_can_leave_temperature_out(api):
    _anthropic(api, send_temperature=False).complete(_request("claude-test", temperature=0.5))
    assert "temperature" not in api.seen[0][2]


def test_anthropic_overloaded_then_success(api):
    api.fail(529, {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}})
    api.fail(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}})
    sleeps: list[float] = []
    r = _client(_anthropic(api), sleeps).complete(_request("claude-test"))
    assert r.content == "echo: hello"
    assert len(api.seen) == 3 and sleeps == [1.0, 2.0]


def test_anthropic_auth_error_is_permanent(api):
    api.fail(401, {"type": "error", "error": {"type": "authentication_error", "message": "no"}})
    with pytest.raises(LLMError) as info:
        _anthropic(api).complete(_request("claude-test"))
    assert not isinstance(info.value, TransientLLMError)


def test_missing_api_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    with pytest.raises(LLMError, match="DEEPSEEK_API_KEY"):
        make_provider("openai:deepseek-chat", api_key_env="DEEPSEEK_API_KEY")


def test_key_from_named_env_var(api, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    make_provider("openai:m", base_url=api.url + "/v1", api_key_env="MY_KEY").complete(
        _request("m")
    )
    assert api.seen[0][1]["authorization"] == "Bearer sk-from-env"


def test_base_url_from_env(api, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", api.url + "/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = make_provider("openai:local-model")  # local server: no key needed
    assert provider.complete(_request("local-model")).content == "echo: hello"
    assert api.seen[0][2]["max_tokens"] == 64
