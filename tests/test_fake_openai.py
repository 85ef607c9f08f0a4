"""The fake OpenAI server itself: it must answer and refuse the way the real API does."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import openai
import pytest

from tests.fake_openai import (
    DEFAULT_KEY,
    DEFAULT_MODEL,
    LLAMA_CPP_REJECTION,
    Delay,
    Disconnect,
    ErrorReply,
    FakeOpenAI,
    Reply,
    count_tokens,
    fake_openai_fixture,  # noqa: F401  (registers `fake_openai` in this module too)
    prompt_tokens_of,
    running_fake_openai,
)

STRICT_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


@pytest.fixture
def http(fake_openai: FakeOpenAI) -> Iterator[httpx2.Client]:
    with httpx2.Client(
        base_url=fake_openai.base_url,
        headers={"Authorization": f"Bearer {DEFAULT_KEY}"},
        timeout=5,
    ) as client:
        yield client


def chat(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": DEFAULT_MODEL,
        "messages": [{"role": "user", "content": "Answer in JSON."}],
    }
    body.update(overrides)
    return body


def error_of(response: httpx2.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error, dict)
    return error


def test_fixture_serves_real_shaped_completions_to_the_openai_client(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.enqueue({"ok": True})
    client = openai.OpenAI(api_key=DEFAULT_KEY, base_url=fake_openai.base_url, max_retries=0)

    completion = client.chat.completions.create(
        model=DEFAULT_MODEL,
        messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": STRICT_SCHEMA, "strict": True},
        },
        temperature=0,
        max_tokens=50,
    )

    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == DEFAULT_MODEL
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert json.loads(choice.message.content or "") == {"ok": True}
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    request = fake_openai.chat_requests[0].json
    assert completion.usage.prompt_tokens == prompt_tokens_of(request)
    assert completion.usage.completion_tokens == count_tokens('{"ok": true}')
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    assert fake_openai.prompt_tokens == completion.usage.prompt_tokens
    assert fake_openai.total_tokens == completion.usage.total_tokens


def test_models_endpoint(http: httpx2.Client) -> None:
    response = http.get("/models")
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["data"]] == [DEFAULT_MODEL]


def test_missing_and_wrong_keys_get_401(fake_openai: FakeOpenAI) -> None:
    url = fake_openai.base_url + "/chat/completions"
    missing = httpx2.post(url, json=chat())
    assert missing.status_code == 401
    assert "didn't provide an API key" in error_of(missing)["message"]
    wrong = httpx2.post(url, json=chat(), headers={"Authorization": "Bearer sk-wrong-123456"})
    assert wrong.status_code == 401
    assert error_of(wrong)["code"] == "invalid_api_key"
    assert "sk-wrong-123456" not in wrong.text
    assert fake_openai.pending == 0


def test_authorization_is_redacted_in_recorded_requests(
    fake_openai: FakeOpenAI, http: httpx2.Client
) -> None:
    fake_openai.enqueue("{}")
    http.post("/chat/completions", json=chat())
    [recorded] = fake_openai.requests
    assert recorded.headers["authorization"] == "Bearer [redacted]"
    assert DEFAULT_KEY not in json.dumps(recorded.headers)
    assert recorded.json["model"] == DEFAULT_MODEL


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (chat(frobnicate=True), 400, "Unrecognized request argument supplied: frobnicate"),
        ({"messages": [{"role": "user", "content": "x"}]}, 400, "model parameter"),
        ({"model": DEFAULT_MODEL}, 400, "Missing required parameter: 'messages'"),
        (chat(messages=[]), 400, "empty array"),
        (chat(messages=[{"role": "bot", "content": "x"}]), 400, "Invalid value: 'bot'"),
        (chat(messages=[{"content": "x"}]), 400, "'messages[0].role'"),
        (chat(messages=[{"role": "user", "content": "x", "x": 1}]), 400, "'x' was unexpected"),
        (chat(temperature=3), 400, "temperature"),
        (chat(max_tokens=0), 400, "max_tokens"),
        (chat(max_tokens=5, max_completion_tokens=5), 400, "cannot both be set"),
        (chat(response_format={"type": "xml"}), 400, "Invalid value: 'xml'"),
        (chat(response_format={"type": "json_schema"}), 400, "response_format.json_schema'"),
        (
            chat(response_format={"type": "json_schema", "json_schema": {"schema": {}}}),
            400,
            "response_format.json_schema.name'",
        ),
        (
            chat(
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "bad name", "schema": STRICT_SCHEMA},
                }
            ),
            400,
            "does not match pattern",
        ),
        (
            chat(
                response_format={
                    "type": "json_schema",
                    "json_schema": {
                        "name": "a",
                        "strict": True,
                        "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                    },
                }
            ),
            400,
            "'additionalProperties' is required to be supplied and to be false",
        ),
        (
            chat(
                response_format={
                    "type": "json_schema",
                    "json_schema": {
                        "name": "a",
                        "strict": True,
                        "schema": {**STRICT_SCHEMA, "required": []},
                    },
                }
            ),
            400,
            "Missing 'ok'",
        ),
        (
            chat(
                messages=[{"role": "user", "content": "no magic word"}],
                response_format={"type": "json_object"},
            ),
            400,
            "must contain the word 'json'",
        ),
        (chat(model="gpt-nope"), 404, "does not exist"),
    ],
)
def test_requests_the_real_api_rejects_are_rejected(
    http: httpx2.Client, body: dict[str, Any], status: int, fragment: str
) -> None:
    response = http.post("/chat/completions", json=body)
    assert response.status_code == status
    assert fragment in error_of(response)["message"]


def test_unparseable_body_and_unknown_path(http: httpx2.Client) -> None:
    garbage = http.post(
        "/chat/completions", content=b"{nope", headers={"Content-Type": "application/json"}
    )
    assert garbage.status_code == 400
    assert "could not parse the JSON body" in error_of(garbage)["message"]
    assert http.post("/completions", json=chat()).status_code == 404


def test_llama_cpp_mode_rejects_json_schema_but_serves_json_object() -> None:
    with FakeOpenAI(json_schema_supported=False) as server:
        server.enqueue({"ok": True})
        url = server.base_url + "/chat/completions"
        auth = {"Authorization": f"Bearer {DEFAULT_KEY}"}
        schema_format = {
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": STRICT_SCHEMA, "strict": True},
        }
        rejected = httpx2.post(url, json=chat(response_format=schema_format), headers=auth)
        assert rejected.status_code == 500
        assert rejected.json() == {
            "error": {"code": 500, "message": LLAMA_CPP_REJECTION, "type": "server_error"}
        }
        assert "Input should be 'text' or 'json_object'" in LLAMA_CPP_REJECTION
        served = httpx2.post(url, json=chat(response_format={"type": "json_object"}), headers=auth)
        assert served.status_code == 200


def test_scripted_replies_in_order_then_default(
    fake_openai: FakeOpenAI, http: httpx2.Client
) -> None:
    seen: list[dict[str, Any]] = []

    def dynamic(request: dict[str, Any]) -> Any:
        seen.append(request)
        return {"echo": request["messages"][0]["content"]}

    fake_openai.enqueue(
        "plain text",
        ErrorReply(429, "slow down", headers={"Retry-After": "1"}),
        dynamic,
        Delay(0.05, then=Reply({"late": True}, usage=False)),
        ErrorReply(502, body="<html>bad gateway</html>"),
    )

    def post() -> httpx2.Response:
        return http.post("/chat/completions", json=chat())

    assert post().json()["choices"][0]["message"]["content"] == "plain text"
    limited = post()
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "1"
    assert error_of(limited)["message"] == "slow down"
    assert json.loads(post().json()["choices"][0]["message"]["content"]) == {
        "echo": "Answer in JSON."
    }
    assert seen[0]["model"] == DEFAULT_MODEL
    started = time.monotonic()
    late = post().json()
    assert time.monotonic() - started >= 0.05
    assert "usage" not in late
    gateway = post()
    assert (gateway.status_code, gateway.text) == (502, "<html>bad gateway</html>")
    fallback = post()
    assert fallback.status_code == 500
    assert "no scripted reply" in error_of(fallback)["message"]
    fake_openai.default = lambda _request: {"default": True}
    assert json.loads(post().json()["choices"][0]["message"]["content"]) == {"default": True}


def test_disconnect_closes_without_answering(fake_openai: FakeOpenAI, http: httpx2.Client) -> None:
    fake_openai.enqueue(Disconnect())
    with pytest.raises(httpx2.RemoteProtocolError):
        http.post("/chat/completions", json=chat())


def test_max_tokens_truncates_with_finish_reason_length(
    fake_openai: FakeOpenAI, http: httpx2.Client
) -> None:
    fake_openai.enqueue("x" * 100)
    body = http.post("/chat/completions", json=chat(max_tokens=5)).json()
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == "x" * 20
    assert body["usage"]["completion_tokens"] == 5


def test_token_totals_add_up_and_reset(fake_openai: FakeOpenAI, http: httpx2.Client) -> None:
    fake_openai.enqueue(Reply("a" * 40, prompt_tokens=7), Reply("b" * 8, completion_tokens=1))
    http.post("/chat/completions", json=chat())
    http.post("/chat/completions", json=chat())
    assert fake_openai.completion_tokens == 10 + 1
    assert fake_openai.prompt_tokens == 7 + prompt_tokens_of(chat())
    assert fake_openai.completions_served == 2
    fake_openai.reset()
    assert (fake_openai.total_tokens, fake_openai.requests, fake_openai.pending) == (0, [], 0)


def test_delayed_reply_is_cut_short_when_the_server_stops() -> None:
    gen = running_fake_openai()
    server = next(gen)
    server.enqueue(Delay(30))
    with pytest.raises(httpx2.TransportError):
        httpx2.post(
            server.base_url + "/chat/completions",
            json=chat(),
            headers={"Authorization": f"Bearer {DEFAULT_KEY}"},
            timeout=0.1,
        )
    started = time.monotonic()
    gen.close()  # stops the server
    assert time.monotonic() - started < 2
