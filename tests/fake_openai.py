"""A loopback fake of the OpenAI chat-completions API, for tests and benchmarks.

A real HTTP server on 127.0.0.1 (random port) that answers `POST /v1/chat/completions` and
`GET /v1/models` the way api.openai.com does: bearer-key auth, request validation with
OpenAI's error shapes (unknown parameters, bad `response_format`, non-strict schemas under
`strict: true`, `json_object` without the word "json" in the messages), and real-shaped
completions with usage. An unsupported request therefore fails the test instead of passing
silently.

Script the answers with `server.enqueue(...)`:

- a `str` or `dict`/`list` (JSON-encoded) or `Reply(...)`: a completion with that content;
- `ErrorReply(status, ...)`: an HTTP error (OpenAI's error body unless `body` is given);
- `Delay(seconds, then)`: sleep before answering (to trigger client timeouts);
- `Disconnect()`: close the connection without answering;
- a callable `request_json -> reply`: decide dynamically.

When the queue is empty `server.default` answers (by default a 500 "no scripted reply").
`json_schema_supported=False` makes json_schema requests fail like llama.cpp's server.
Every request is kept in `server.requests` (Authorization redacted); token totals of the
completions served are in `server.prompt_tokens` / `server.completion_tokens`.

Use the `fake_openai` fixture (import `fake_openai_fixture` into conftest.py), or
`with FakeOpenAI() as server:` directly.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeAlias

import pytest

DEFAULT_KEY = "sk-test-fake-key"
DEFAULT_MODEL = "fake-model"


@dataclass(frozen=True)
class Reply:
    """A successful completion. Usage is computed unless given; `usage=False` omits it."""

    content: str | dict[str, Any] | list[Any] | None
    finish_reason: str | None = None  # None: "stop", or "length" when max_tokens cut it
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage: bool = True
    refusal: str | None = None
    model: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error. Without `body`, OpenAI's `{"error": {...}}` shape with `message`."""

    status: int
    message: str = "scripted error"
    type: str | None = None
    code: str | int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str | dict[str, Any] | None = None


@dataclass(frozen=True)
class Delay:
    """Wait `seconds` (woken early when the server stops), then answer with `then`."""

    seconds: float
    then: ReplySpec | None = None


@dataclass(frozen=True)
class Disconnect:
    """Close the connection without sending a response."""


ReplySpec: TypeAlias = (
    "str | dict[str, Any] | list[Any] | Reply | ErrorReply | Delay | Disconnect | "
    "Callable[[dict[str, Any]], ReplySpec]"
)


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # Authorization redacted
    body: Any  # parsed JSON, or the raw text when it was not JSON, or None

    @property
    def json(self) -> dict[str, Any]:
        assert isinstance(self.body, dict), f"request body is not a JSON object: {self.body!r}"
        return self.body

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.json["messages"]
        assert isinstance(messages, list)
        return messages


# Top-level parameters api.openai.com accepts on /v1/chat/completions.
KNOWN_PARAMS = frozenset(
    {
        "messages", "model", "audio", "frequency_penalty", "function_call", "functions",
        "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata",
        "modalities", "n", "parallel_tool_calls", "prediction", "presence_penalty",
        "prompt_cache_key", "prompt_cache_retention", "reasoning_effort", "response_format",
        "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
        "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p",
        "user", "verbosity", "web_search_options",
    }
)  # fmt: skip
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
MESSAGE_KEYS = frozenset(
    {"role", "content", "name", "tool_calls", "tool_call_id", "function_call", "refusal", "audio"}
)
SCHEMA_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
LLAMA_CPP_REJECTION = (
    "1 validation error for ResponseFormat\ntype\n  Input should be 'text' or 'json_object' "
    "[type=literal_error, input_value='json_schema', input_type=str]"
)


def count_tokens(text: str) -> int:
    """The fake's tokenizer: deterministic, one token per 4 UTF-8 bytes, rounded up."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def prompt_tokens_of(body: dict[str, Any]) -> int:
    total = 3
    for message in body.get("messages", []):
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        total += 3 + count_tokens(text or "")
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        total += count_tokens(json.dumps(response_format.get("json_schema", {}).get("schema")))
    return total


class _ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": type, "param": param, "code": code}}


def _bad(message: str, param: str | None = None, code: str | None = None) -> _ApiError:
    return _ApiError(400, message, param=param, code=code)


class FakeOpenAI:
    """The fake server. Start it with `start()` or as a context manager."""

    def __init__(
        self,
        *,
        api_key: str | None = DEFAULT_KEY,
        models: tuple[str, ...] | None = (DEFAULT_MODEL,),
        json_schema_supported: bool = True,
    ) -> None:
        self.api_key = api_key
        self.models = models
        self.json_schema_supported = json_schema_supported
        self.default: Callable[[dict[str, Any]], ReplySpec] = lambda _request: ErrorReply(
            500, "no scripted reply", type="server_error"
        )
        self.requests: list[RecordedRequest] = []
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.completions_served = 0
        self._queue: deque[ReplySpec] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        handler = type("_BoundHandler", (_Handler,), {"fake": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the fake server is not running"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting and inspection -----------------------------------------------------------

    def enqueue(self, *replies: ReplySpec) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.prompt_tokens = self.completion_tokens = self.completions_served = 0

    # -- request handling (called from handler threads) ---------------------------------------

    def _next_reply(self, request: dict[str, Any]) -> ReplySpec:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self.default(request)

    def _check_auth(self, headers: dict[str, str]) -> None:
        if self.api_key is None:
            return
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            raise _ApiError(
                401,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            )
        if auth[7:].strip() != self.api_key:
            shown = auth[7:10] + "*" * 4 + auth[-4:]
            raise _ApiError(
                401,
                f"Incorrect API key provided: {shown}. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                code="invalid_api_key",
            )

    def _validate(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise _bad("Invalid request body: expected a JSON object.")
        for key in body:
            if key not in KNOWN_PARAMS:
                raise _bad(f"Unrecognized request argument supplied: {key}")
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _bad("you must provide a model parameter", param="model")
        _validate_messages(body.get("messages"))
        temperature = body.get("temperature")
        if temperature is not None and (
            not isinstance(temperature, int | float) or not 0 <= temperature <= 2
        ):
            raise _bad(
                f"Invalid 'temperature': expected a number between 0 and 2, got {temperature}.",
                param="temperature",
            )
        if "max_tokens" in body and "max_completion_tokens" in body:
            raise _bad(
                "max_tokens and max_completion_tokens cannot both be set.", param="max_tokens"
            )
        for name in ("max_tokens", "max_completion_tokens"):
            value = body.get(name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise _bad(f"Invalid '{name}': expected an integer >= 1.", param=name)
        if body.get("stream"):
            raise _bad("the fake server does not stream", param="stream")
        if body.get("n", 1) != 1:
            raise _bad("the fake server answers n=1 only", param="n")
        if "response_format" in body:
            _validate_response_format(body["response_format"], body["messages"])
        if self.models is not None and model not in self.models:
            raise _ApiError(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        return body

    def _complete(self, handler: _Handler, request: dict[str, Any]) -> None:
        response_format = request.get("response_format") or {}
        if not self.json_schema_supported and response_format.get("type") == "json_schema":
            handler.send_json(
                500,
                {"error": {"code": 500, "message": LLAMA_CPP_REJECTION, "type": "server_error"}},
            )
            return
        reply = self._next_reply(request)
        for _ in range(10):  # callables and delays may nest
            if isinstance(reply, Delay):
                if self._stopping.wait(reply.seconds):
                    return
                reply = reply.then if reply.then is not None else self.default(request)
            elif callable(reply) and not isinstance(reply, Reply | ErrorReply | Disconnect):
                reply = reply(request)
            else:
                break
        if isinstance(reply, Disconnect):
            handler.close_connection = True
            return
        if isinstance(reply, ErrorReply):
            body: str | dict[str, Any]
            if reply.body is not None:
                body = reply.body
            else:
                body = {
                    "error": {
                        "message": reply.message,
                        "type": reply.type
                        or ("server_error" if reply.status >= 500 else "invalid_request_error"),
                        "param": None,
                        "code": reply.code,
                    }
                }
            handler.send_json(reply.status, body, reply.headers)
            return
        if not isinstance(reply, Reply):
            reply = Reply(content=reply)  # type: ignore[arg-type]
        handler.send_json(200, self._completion(request, reply), reply.headers)

    def _completion(self, request: dict[str, Any], reply: Reply) -> dict[str, Any]:
        content = reply.content
        if content is not None and not isinstance(content, str):
            content = json.dumps(content)
        finish_reason = reply.finish_reason or "stop"
        completion_tokens = count_tokens(content or "")
        limit = request.get("max_completion_tokens") or request.get("max_tokens")
        if content is not None and limit is not None and completion_tokens > limit:
            content = content.encode("utf-8")[: limit * 4].decode("utf-8", "ignore")
            completion_tokens = limit
            finish_reason = reply.finish_reason or "length"
        if reply.completion_tokens is not None:
            completion_tokens = reply.completion_tokens
        prompt_tokens = (
            reply.prompt_tokens if reply.prompt_tokens is not None else prompt_tokens_of(request)
        )
        with self._lock:
            self.completions_served += 1
            serial = self.completions_served
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
        completion: dict[str, Any] = {
            "id": f"chatcmpl-fake{serial:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or request["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "refusal": reply.refusal,
                        "annotations": [],
                    },
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }
        if reply.usage:
            completion["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        return completion


def _validate_messages(messages: Any) -> None:
    if messages is None:
        raise _bad(
            "Missing required parameter: 'messages'.",
            param="messages",
            code="missing_required_parameter",
        )
    if not isinstance(messages, list):
        raise _bad("Invalid type for 'messages': expected an array.", param="messages")
    if not messages:
        raise _bad(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead.",
            param="messages",
            code="empty_array",
        )
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _bad(f"Invalid type for '{where}': expected an object.", param=where)
        if "role" not in message:
            raise _bad(
                f"Missing required parameter: '{where}.role'.",
                param=f"{where}.role",
                code="missing_required_parameter",
            )
        if message["role"] not in ROLES:
            raise _bad(
                f"Invalid value: '{message['role']}'. Supported values are: 'system', "
                "'assistant', 'user', 'function', 'tool', and 'developer'.",
                param=f"{where}.role",
                code="invalid_value",
            )
        extra = sorted(set(message) - MESSAGE_KEYS)
        if extra:
            raise _bad(
                f"Additional properties are not allowed ('{extra[0]}' was unexpected) - "
                f"'messages.{i}'",
                param=where,
            )
        content = message.get("content")
        if content is None and message["role"] != "assistant":
            raise _bad(
                f"Missing required parameter: '{where}.content'.",
                param=f"{where}.content",
                code="missing_required_parameter",
            )
        if content is not None and not isinstance(content, str | list):
            raise _bad(
                f"Invalid type for '{where}.content': expected one of a string or array of "
                "objects.",
                param=f"{where}.content",
            )


def _validate_response_format(response_format: Any, messages: list[dict[str, Any]]) -> None:
    if not isinstance(response_format, dict):
        raise _bad("Invalid type for 'response_format': expected an object.", "response_format")
    kind = response_format.get("type")
    if kind not in ("text", "json_object", "json_schema"):
        raise _bad(
            f"Invalid value: '{kind}'. Supported values are: 'json_object', 'json_schema', "
            "and 'text'.",
            param="response_format.type",
            code="invalid_value",
        )
    allowed = {"type", "json_schema"} if kind == "json_schema" else {"type"}
    extra = sorted(set(response_format) - allowed)
    if extra:
        raise _bad(
            f"Unrecognized request argument supplied: response_format.{extra[0]}",
            "response_format",
        )
    if kind == "json_object":
        text = json.dumps([m.get("content") for m in messages]).lower()
        if "json" not in text:
            raise _bad(
                "'messages' must contain the word 'json' in some form, to use "
                "'response_format' of type 'json_object'.",
                param="messages",
            )
    if kind != "json_schema":
        return
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise _bad(
            "Missing required parameter: 'response_format.json_schema'.",
            param="response_format.json_schema",
            code="missing_required_parameter",
        )
    extra = sorted(set(spec) - {"name", "description", "schema", "strict"})
    if extra:
        raise _bad(
            f"Unrecognized request argument supplied: response_format.json_schema.{extra[0]}",
            "response_format.json_schema",
        )
    name = spec.get("name")
    if not isinstance(name, str):
        raise _bad(
            "Missing required parameter: 'response_format.json_schema.name'.",
            param="response_format.json_schema.name",
            code="missing_required_parameter",
        )
    if not SCHEMA_NAME.match(name):
        raise _bad(
            "Invalid 'response_format.json_schema.name': string does not match pattern. "
            "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
            param="response_format.json_schema.name",
            code="invalid_value",
        )
    schema = spec.get("schema")
    if schema is not None and not isinstance(schema, dict):
        raise _bad("Invalid type for 'response_format.json_schema.schema'.", "response_format")
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad("Invalid type for 'response_format.json_schema.strict'.", "response_format")
    if strict:
        if not isinstance(schema, dict):
            raise _bad("strict json_schema requires a schema", "response_format")
        if schema.get("type") != "object":
            raise _bad(
                f"Invalid schema for response_format '{name}': schema must be a JSON Schema "
                f"of 'type: \"object\"', got 'type: \"{schema.get('type')}\"'.",
                "response_format",
                "invalid_json_schema",
            )
        _check_strict(schema, (), name)


def _check_strict(node: Any, context: tuple[str, ...], name: str) -> None:
    """OpenAI's strict-mode rules for every subschema (the ones our client must meet)."""
    if not isinstance(node, dict):
        return

    def fail(problem: str) -> _ApiError:
        return _bad(
            f"Invalid schema for response_format '{name}': In context={context}, {problem}",
            "response_format",
            "invalid_json_schema",
        )

    if "default" in node:
        raise fail("'default' is not permitted.")
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, dict):
        if node.get("additionalProperties") is not False:
            raise fail("'additionalProperties' is required to be supplied and to be false.")
        if isinstance(properties, dict):
            required = node.get("required")
            missing = [p for p in properties if not isinstance(required, list) or p not in required]
            if missing:
                raise fail(
                    "'required' is required to be supplied and to be an array including every "
                    f"key in properties. Missing '{missing[0]}'."
                )
            for key, sub in properties.items():
                _check_strict(sub, (*context, "properties", key), name)
    if "$ref" in node and len(node) > 1:
        raise fail("$ref cannot have keywords {" + ", ".join(k for k in node if k != "$ref") + "}.")
    for key in ("$defs", "definitions"):
        defs = node.get(key)
        if isinstance(defs, dict):
            for def_name, sub in defs.items():
                _check_strict(sub, (*context, key, def_name), name)
    if isinstance(node.get("items"), dict):
        _check_strict(node["items"], (*context, "items"), name)
    for key in ("anyOf", "allOf"):
        variants = node.get(key)
        if isinstance(variants, list):
            for i, sub in enumerate(variants):
                _check_strict(sub, (*context, key, str(i)), name)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Buffer the response so headers and body leave in one segment: written separately,
    # Nagle's algorithm and delayed ACKs add ~40 ms to every request.
    wbufsize = 1 << 16
    fake: FakeOpenAI  # set on the per-server subclass

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def send_json(
        self, status: int, body: str | dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        payload = (body if isinstance(body, str) else json.dumps(body)).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("x-request-id", f"req_fake{len(self.fake.requests):06d}")
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. timed out) first

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            text = raw.decode("utf-8", "replace")
            try:
                body = json.loads(text)
            except json.JSONDecodeError:
                body = text
        headers = {k.lower(): v for k, v in self.headers.items()}
        if "authorization" in headers:
            headers["authorization"] = "Bearer [redacted]"
        recorded = RecordedRequest(self.command, self.path, headers, body)
        with self.fake._lock:
            self.fake.requests.append(recorded)
        return recorded

    def do_GET(self) -> None:
        self._record()
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            self.fake._check_auth({k.lower(): v for k, v in self.headers.items()})
            if path != "/v1/models":
                raise _ApiError(404, f"Invalid URL (GET {self.path})")
        except _ApiError as err:
            self.send_json(err.status, err.body)
            return
        models = self.fake.models or (DEFAULT_MODEL,)
        self.send_json(
            200,
            {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models
                ],
            },
        )

    def do_POST(self) -> None:
        recorded = self._record()
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            self.fake._check_auth({k.lower(): v for k, v in self.headers.items()})
            if path != "/v1/chat/completions":
                raise _ApiError(404, f"Invalid URL (POST {self.path})")
            if isinstance(recorded.body, str) or recorded.body is None:
                raise _bad(
                    "We could not parse the JSON body of your request. (HINT: This likely means "
                    "you aren't using your HTTP library correctly.)"
                )
            request = self.fake._validate(recorded.body)
        except _ApiError as err:
            self.send_json(err.status, err.body)
            return
        self.fake._complete(self, request)


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connections are refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def running_fake_openai(**options: Any) -> Generator[FakeOpenAI, None, None]:
    """Yield a started FakeOpenAI and stop it afterwards (the body of the fixture)."""
    server = FakeOpenAI(**options).start()
    try:
        yield server
    finally:
        server.stop()


# Named apart from the fixture so importing it (conftest.py) does not shadow test arguments.
@pytest.fixture(name="fake_openai")
def fake_openai_fixture() -> Iterator[FakeOpenAI]:
    """A running fake OpenAI server; point an LLMProfile at `fake_openai.base_url`."""
    yield from running_fake_openai()
