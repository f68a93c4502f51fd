"""Loopback stub model servers for driving the real host CLIs offline.

Three servers, all stdlib ``http.server`` in a daemon thread on 127.0.0.1 with an
ephemeral port:

* :class:`AnthropicStub` speaks enough of the Anthropic Messages API for
  Claude Code (``POST /v1/messages`` streamed as SSE, ``count_tokens``).
* :class:`OpenAIResponsesStub` speaks enough of the OpenAI Responses API for
  Codex (``POST /v1/responses`` streamed as SSE, ``GET /v1/models``).
* :class:`ChatCompletionsStub` speaks enough of the OpenAI Chat Completions API
  for GitHub Copilot CLI's custom provider (``POST /v1/chat/completions``
  streamed as SSE, ``GET /v1/models``).

Every request (method, path, headers, parsed JSON body) is recorded, under a
lock, in ``stub.requests``.  Replies come from a *script*: a list of
:func:`text` / :func:`shell` replies (or callables ``Recorded -> Reply``, called with the
request they answer) consumed one per *agent turn request*
(:func:`tool` calls a named tool, e.g. an MCP server's, where the stub supports it),
falling back to the plain text ``"ok"`` once the script is exhausted.

Which requests consume the script
---------------------------------
Hosts make side requests besides the agent loop (Claude Code: title /
topic generation, haiku "quota" probes, etc.).  Those never carry the agent's
tool list, whereas every agent-loop request does.  So a request consumes a
script entry only if its body has a non-empty ``tools`` array (see
``is_agent_request``); other model requests get a plain ``"ok"`` text reply
and are recorded too.  ``stub.agent_requests()`` returns just the agent-loop
requests, in order.

Bounds: request bodies over ``MAX_BODY`` are refused (413), the stub answers
at most ``max_requests`` requests (503 afterwards), and each server socket has
a timeout, so nothing can spin forever.  Use the stubs as context managers (or
call ``close()``) so the thread is always shut down.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

MAX_BODY = 64 * 1024 * 1024  # Claude Code bodies with big hook outputs are a few hundred KB.
DEFAULT_MAX_REQUESTS = 500


# --------------------------------------------------------------------------
# Script entries
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One canned model reply: plain text, a shell tool call, or a named tool call."""

    kind: str  # "text" | "shell" | "tool"
    text: str = ""
    cmd: str = ""  # the shell command, or the tool's name
    args: str = ""  # a "tool" call's arguments, as JSON text


def text(s: str) -> Reply:
    """A reply that is just assistant text; ends the agent's turn."""
    return Reply("text", text=s)


def shell(cmd: str) -> Reply:
    """A reply that asks the host to run ``cmd`` in its shell tool.

    Claude Code: ``tool_use`` of ``Bash`` with ``{"command": cmd}``.
    Codex: ``function_call`` of ``exec_command`` with ``{"cmd": cmd}``.
    The host sends the command's output back in its next request, which
    consumes the next script entry.
    """
    return Reply("shell", cmd=cmd)


def tool(name: str, args: dict[str, Any]) -> Reply:
    """A reply that calls the host's tool ``name`` (as the host names it, e.g.
    ``agentmsg-inbox`` for an MCP tool in Copilot CLI) with ``args``.
    The Anthropic and Responses stubs answer with it too (a ``tool_use`` block, a ``function_call`` item)."""
    return Reply("tool", cmd=name, args=json.dumps(args))


def custom(name: str, text: str) -> Reply:
    """A freeform (``custom``) tool call, as Codex's Responses API names one: ``custom_tool_call`` of ``name``
    with ``text`` as its input (Codex's ``apply_patch`` with a patch).  Only :class:`OpenAIResponsesStub`."""
    return Reply("custom", cmd=name, args=text)


def _coerce(entry: Reply | str | Any) -> Any:
    if isinstance(entry, Reply) or callable(entry):  # a callable: Recorded -> Reply | str, at request time
        return entry
    if isinstance(entry, str):
        return text(entry)
    raise TypeError(f"script entries must be Reply or str, not {type(entry).__name__}")


# --------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str  # path without query string
    query: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None
    raw: bytes = field(repr=False, default=b"")
    agent: bool = False  # consumed a script entry
    proxied: bool = False  # arrived as a proxy request (CONNECT / absolute URI): an off-box attempt
    reply: Reply | None = None  # what the stub answered (model requests only)

    def text_blob(self) -> str:
        """The raw body as text: handy for ``needle in req.text_blob()``."""
        return self.raw.decode("utf-8", "replace")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


class _StubBase:
    """Shared machinery: thread, recording, script consumption, bounds."""

    name = "stub"

    def __init__(
        self,
        script: Iterable[Reply | str] = (),
        *,
        max_requests: int = DEFAULT_MAX_REQUESTS,
        fallback: str = "ok",
    ) -> None:
        self._lock = threading.Lock()
        self._script: list[Any] = [_coerce(e) for e in script]
        self._fallback = fallback
        self._max_requests = max_requests
        self._served = 0
        self.requests: list[Recorded] = []
        self.errors: list[Exception] = []  # raised by callable script entries
        self._seq = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 60  # per-connection socket timeout

            def log_message(self, *a: Any) -> None:  # silence stderr
                pass

            def _handle(self) -> None:
                stub._dispatch(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_CONNECT = _handle

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.timeout = 1
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"{self.name}-{self.port}",
            daemon=True,
        )
        self._thread.start()

    # ---- public API ----------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def push(self, *entries: Reply | str) -> None:
        """Append replies to the script (e.g. between two host turns)."""
        with self._lock:
            self._script.extend(_coerce(e) for e in entries)

    def again(self, entry: Any) -> None:
        """Put ``entry`` first in the script: the next agent request gets it (a scripted model that, told to,
        runs a command again and then reads its output the same way)."""
        with self._lock:
            self._script.insert(0, _coerce(entry))

    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def snapshot(self) -> list[Recorded]:
        with self._lock:
            return list(self.requests)

    def agent_requests(self) -> list[Recorded]:
        """Recorded requests that were agent-loop model calls, in order."""
        with self._lock:
            return [r for r in self.requests if r.agent]

    def model_requests(self) -> list[Recorded]:
        """All recorded model calls (agent loop + side calls)."""
        with self._lock:
            return [r for r in self.requests if r.reply is not None]

    def leaks(self) -> list[Recorded]:
        """Requests a host tried to send off the machine (refused via the proxy)."""
        with self._lock:
            return [r for r in self.requests if r.proxied]

    def bodies_text(self) -> str:
        """All recorded bodies concatenated: a coarse 'was X ever sent?' probe."""
        with self._lock:
            return "\n".join(r.text_blob() for r in self.requests)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- internals -----------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._seq += 1
            return f"{prefix}_{self._seq:04d}{uuid.uuid4().hex[:8]}"

    def _take(self, agent: bool, rec: Recorded | None = None) -> Reply:
        with self._lock:
            entry = self._script.pop(0) if agent and self._script else None
        if entry is None:
            return text(self._fallback)
        if callable(entry):  # decided from the request itself (e.g. a command its injected text names)
            try:
                return _coerce(entry(rec))
            except Exception as exc:  # kept for the test (stub.errors); the turn ends
                with self._lock:
                    self.errors.append(exc)
                return text(f"stub script error: {type(exc).__name__}: {exc}")
        return entry

    def _dispatch(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send_json(h, 413, {"error": "body too large"})
            h.close_connection = True
            return
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        proxied = h.command == "CONNECT" or h.path.startswith(("http://", "https://"))
        rec = Recorded(
            method=h.command,
            path=h.path if proxied else parts.path,
            query="" if proxied else parts.query,
            headers={k.lower(): v for k, v in h.headers.items()},
            body=body,
            raw=raw,
        )
        with self._lock:
            self._served += 1
            over = self._served > self._max_requests
            self.requests.append(rec)
        if over:
            self._send_json(h, 503, {"error": "stub request budget exhausted"})
            return
        if proxied:
            # The harness points HTTP(S)_PROXY at the stub so that any request a
            # host makes to a non-loopback address lands here instead of the
            # network.  Record it and refuse it.
            with self._lock:
                rec.proxied = True
            self._send_json(h, 403, {"error": "stub: off-box traffic refused"})
            h.close_connection = True
            return
        try:
            self.route(h, rec)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # helpers for subclasses
    @staticmethod
    def _send_json(h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)

    @staticmethod
    def _send_sse(h: BaseHTTPRequestHandler, events: list[tuple[str, dict]]) -> None:
        payload = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)
        h.wfile.flush()

    def route(self, h: BaseHTTPRequestHandler, rec: Recorded) -> None:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def is_agent_request(body: Any) -> bool:
        return isinstance(body, dict) and bool(body.get("tools"))


# --------------------------------------------------------------------------
# Anthropic Messages API (Claude Code)
# --------------------------------------------------------------------------


class AnthropicStub(_StubBase):
    """Stub for ``ANTHROPIC_BASE_URL``.

    * ``POST /v1/messages[?beta=true]`` -> SSE (or JSON when ``stream`` is false)
    * ``POST /v1/messages/count_tokens`` -> ``{"input_tokens": 10}``
    * anything else -> 404 JSON error (recorded)
    """

    name = "anthropic-stub"
    tool_name = "Bash"

    def route(self, h: BaseHTTPRequestHandler, rec: Recorded) -> None:
        path = rec.path.rstrip("/")
        if h.command == "POST" and path.endswith("/messages/count_tokens"):
            self._send_json(h, 200, {"input_tokens": 10})
            return
        if h.command == "POST" and path.endswith("/v1/messages"):
            agent = self.is_agent_request(rec.body)
            reply = self._take(agent, rec)
            with self._lock:
                rec.agent, rec.reply = agent, reply
            model = rec.body.get("model", "claude-stub") if isinstance(rec.body, dict) else "claude-stub"
            if isinstance(rec.body, dict) and rec.body.get("stream") is False:
                self._send_json(h, 200, self._message_json(reply, model))
            else:
                self._send_sse(h, self._message_events(reply, model))
            return
        self._send_json(
            h,
            404,
            {
                "type": "error",
                "error": {"type": "not_found_error", "message": f"stub: no route {h.command} {rec.path}"},
            },
        )

    def _content(self, reply: Reply) -> tuple[dict, str]:
        if reply.kind == "tool":  # any of the host's tools by name (Edit, Write, ...), its input as JSON text
            return {"type": "tool_use", "id": self._next_id("toolu"), "name": reply.cmd,
                    "input": json.loads(reply.args)}, "tool_use"
        if reply.kind == "shell":
            return (
                {
                    "type": "tool_use",
                    "id": self._next_id("toolu"),
                    "name": self.tool_name,
                    "input": {"command": reply.cmd},
                },
                "tool_use",
            )
        return {"type": "text", "text": reply.text}, "end_turn"

    def _message_json(self, reply: Reply, model: str) -> dict:
        block, stop = self._content(reply)
        return {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def _message_events(self, reply: Reply, model: str) -> list[tuple[str, dict]]:
        block, stop = self._content(reply)
        if block["type"] == "tool_use":
            start = dict(block, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        return [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": self._next_id("msg"),
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": 10,
                            "output_tokens": 1,
                            "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 0,
                        },
                    },
                },
            ),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]


# --------------------------------------------------------------------------
# OpenAI Responses API (Codex)
# --------------------------------------------------------------------------


class OpenAIResponsesStub(_StubBase):
    """Stub for a Codex ``[model_providers.<x>]`` with ``wire_api = "responses"``.

    * ``POST /v1/responses`` -> SSE
    * ``GET /v1/models`` -> a one-model list
    * anything else -> 404 JSON error (recorded)
    """

    name = "openai-stub"
    tool_name = "exec_command"
    model = "gpt-stub"

    def route(self, h: BaseHTTPRequestHandler, rec: Recorded) -> None:
        path = rec.path.rstrip("/")
        if h.command == "POST" and path.endswith("/responses"):
            agent = self.is_agent_request(rec.body)
            reply = self._take(agent, rec)
            with self._lock:
                rec.agent, rec.reply = agent, reply
            self._send_sse(h, self._response_events(reply))
            return
        if h.command in ("GET", "HEAD") and path.endswith("/models"):
            self._send_json(
                h,
                200,
                {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "stub"}]},
            )
            return
        self._send_json(
            h,
            404,
            {
                "error": {
                    "message": f"stub: no route {h.command} {rec.path}",
                    "type": "invalid_request_error",
                    "code": "not_found",
                }
            },
        )

    def _response_events(self, reply: Reply) -> list[tuple[str, dict]]:
        resp_id = self._next_id("resp")
        if reply.kind in ("shell", "tool"):
            item = {
                "type": "function_call",
                "id": self._next_id("fc"),
                "call_id": self._next_id("call"),
                "name": self.tool_name if reply.kind == "shell" else reply.cmd,
                "arguments": json.dumps({"cmd": reply.cmd}) if reply.kind == "shell" else reply.args,
                "status": "completed",
            }
            added = dict(item, status="in_progress", arguments="")
            middle: list[tuple[str, dict]] = [
                (
                    "response.function_call_arguments.delta",
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": 0,
                        "delta": item["arguments"],
                    },
                ),
                (
                    "response.function_call_arguments.done",
                    {
                        "type": "response.function_call_arguments.done",
                        "item_id": item["id"],
                        "output_index": 0,
                        "arguments": item["arguments"],
                    },
                ),
            ]
        elif reply.kind == "custom":
            item = {"type": "custom_tool_call", "id": self._next_id("ctc"), "call_id": self._next_id("call"),
                    "name": reply.cmd, "input": reply.args, "status": "completed"}
            added = dict(item, status="in_progress", input="")
            middle = [("response.custom_tool_call_input.delta",
                       {"type": "response.custom_tool_call_input.delta", "item_id": item["id"], "output_index": 0,
                        "delta": reply.args}),
                      ("response.custom_tool_call_input.done",
                       {"type": "response.custom_tool_call_input.done", "item_id": item["id"], "output_index": 0,
                        "input": reply.args})]
        else:
            msg_id = self._next_id("msg")
            item = {
                "type": "message",
                "id": msg_id,
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
            added = {"type": "message", "id": msg_id, "role": "assistant", "status": "in_progress", "content": []}
            middle = [
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": msg_id,
                        "output_index": 0,
                        "content_index": 0,
                        "delta": reply.text,
                    },
                ),
            ]
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        base = {"id": resp_id, "object": "response", "created_at": 0, "model": self.model}
        return [
            ("response.created", {"type": "response.created", "response": dict(base, status="in_progress", output=[])}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": added}),
            *middle,
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            (
                "response.completed",
                {"type": "response.completed", "response": dict(base, status="completed", output=[item], usage=usage)},
            ),
        ]


# --------------------------------------------------------------------------
# OpenAI Chat Completions (GitHub Copilot CLI's custom provider)
# --------------------------------------------------------------------------


class ChatCompletionsStub(_StubBase):
    """Stub for an OpenAI-compatible ``/v1`` base URL (Copilot CLI's
    ``COPILOT_PROVIDER_BASE_URL``).

    * ``POST /v1/chat/completions`` -> SSE chunks then ``data: [DONE]`` (or one
      JSON completion when ``stream`` is not true)
    * ``GET /v1/models`` -> a one-model list
    * anything else -> 404 JSON error (recorded)

    :func:`shell` replies call ``bash`` with ``{"command", "description"}``;
    :func:`tool` replies call the named tool with the given arguments.
    """

    name = "chat-stub"
    tool_name = "bash"
    model = "stub-model"

    def route(self, h: BaseHTTPRequestHandler, rec: Recorded) -> None:
        path = rec.path.rstrip("/")
        if h.command == "POST" and path.endswith("/chat/completions"):
            agent = self.is_agent_request(rec.body)
            reply = self._take(agent, rec)
            with self._lock:
                rec.agent, rec.reply = agent, reply
            if isinstance(rec.body, dict) and rec.body.get("stream") is True:
                self._send_chunks(h, self._chunks(reply))
            else:
                self._send_json(h, 200, self._completion(reply))
            return
        if h.command in ("GET", "HEAD") and path.endswith("/models"):
            self._send_json(
                h,
                200,
                {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "stub"}]},
            )
            return
        self._send_json(
            h,
            404,
            {"error": {"message": f"stub: no route {h.command} {rec.path}", "type": "invalid_request_error",
                       "code": "not_found"}},
        )

    def _call(self, reply: Reply) -> dict | None:
        if reply.kind == "shell":
            name, args = self.tool_name, json.dumps({"command": reply.cmd, "description": "run a command"})
        elif reply.kind == "tool":
            name, args = reply.cmd, reply.args
        else:
            return None
        return {"id": self._next_id("call"), "type": "function", "function": {"name": name, "arguments": args}}

    def _completion(self, reply: Reply) -> dict:
        call = self._call(reply)
        message: dict[str, Any] = {"role": "assistant", "content": None if call else reply.text}
        if call:
            message["tool_calls"] = [call]
        return {
            "id": self._next_id("chatcmpl"),
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _chunks(self, reply: Reply) -> list[dict]:
        call = self._call(reply)
        cid = self._next_id("chatcmpl")
        base = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": self.model}
        if call:
            delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [dict(call, index=0)]}
        else:
            delta = {"role": "assistant", "content": reply.text}
        return [
            dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
            dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "tool_calls" if call else "stop"}],
                 usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
        ]

    @staticmethod
    def _send_chunks(h: BaseHTTPRequestHandler, chunks: list[dict]) -> None:
        payload = ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)
        h.wfile.flush()


# --------------------------------------------------------------------------
# Gemini API (Gemini CLI with GOOGLE_GEMINI_BASE_URL)
# --------------------------------------------------------------------------


class GeminiStub(_StubBase):
    """Stub for Gemini CLI's ``GOOGLE_GEMINI_BASE_URL`` (/work/shared/HOSTS-MORE.md).

    * ``POST /v1beta/models/<model>:streamGenerateContent?alt=sse`` -> SSE ``data: {"candidates": [...]}``
    * ``POST /v1beta/models/<model>:generateContent`` -> one JSON response (Gemini's side calls)
    * ``POST /v1beta/models/<model>:countTokens`` -> ``{"totalTokens": 10}``
    * anything else -> 404 JSON error (recorded)

    Agent-loop requests carry ``tools`` (function declarations), as on the other hosts.  :func:`shell`
    replies call ``run_shell_command`` with ``{"command"}``; the result comes back as a ``functionResponse``.
    """

    name = "gemini-stub"
    tool_name = "run_shell_command"

    def route(self, h: BaseHTTPRequestHandler, rec: Recorded) -> None:
        path = rec.path.rstrip("/")
        if h.command == "POST" and path.endswith((":streamGenerateContent", ":generateContent")):
            agent = self.is_agent_request(rec.body)
            reply = self._take(agent, rec)
            with self._lock:
                rec.agent, rec.reply = agent, reply
            doc = self._response(reply)
            if path.endswith(":streamGenerateContent"):
                payload = f"data: {json.dumps(doc)}\r\n\r\n".encode()
                h.send_response(200)
                h.send_header("Content-Type", "text/event-stream")
                h.send_header("Content-Length", str(len(payload)))
                h.end_headers()
                h.wfile.write(payload)
                h.wfile.flush()
            else:
                self._send_json(h, 200, doc)
            return
        if h.command == "POST" and path.endswith(":countTokens"):
            self._send_json(h, 200, {"totalTokens": 10})
            return
        self._send_json(h, 404, {"error": {"code": 404, "message": f"stub: no route {h.command} {rec.path}",
                                           "status": "NOT_FOUND"}})

    def _response(self, reply: Reply) -> dict:
        if reply.kind == "shell":
            part: dict[str, Any] = {"functionCall": {"name": self.tool_name, "args": {"command": reply.cmd}}}
        elif reply.kind == "tool":
            part = {"functionCall": {"name": reply.cmd, "args": json.loads(reply.args)}}
        else:
            part = {"text": reply.text}
        return {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "gemini-2.5-flash",
        }
