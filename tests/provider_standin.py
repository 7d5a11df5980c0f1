"""A local stand-in for LLM providers: a real HTTP server on 127.0.0.1 speaking both wire formats.

``POST /v1/chat/completions`` answers like OpenAI's chat completions, ``POST /v1/messages`` like
Anthropic's Messages API, ``POST /v1/embeddings`` like OpenAI's embeddings with a deterministic
hashed bag of words (:func:`bag_of_words`: texts sharing word stems point the same way, so a
paraphrase scores above unrelated text; faults apply to it too). Replies are scripted: each request first takes the next item of
``faults`` (a fault, or a fixed reply text), then the first rule whose marker occurs in the
prompt (a reply text, or a fault such as one of ``HOSTILE``), then ``default``. Every request is
recorded (path, headers, body) for assertions.

``HOSTILE`` holds the replies of a provider gone wrong, by name: a lone surrogate in the reply
text, a reply cut in the middle of an emoji (as an escape, and as raw bytes), NaN and 1e400 for
token counts, a body nested 100,000 deep, a duplicate key, and control characters, ESC and
``<script>`` in the rationale.

    with StandIn(key="sk-test") as standin:
        standin.rules.append(("UNSUPPORTED", verdict("fail", "a claim is not in the context")))
        standin.faults += [Fault(429, retry_after="1"), Fault(500), Fault("malformed"), Fault("slow", 2.0)]
        ... base_url=standin.openai_url or standin.anthropic_url ...
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


DIMENSIONS = 256
STOP = set("a an and are as at be by can do does for from how i in is it of on or the this to what when "
           "where which who why with you your".split())


def bag_of_words(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """A unit vector: each word's five-letter stem hashed (sha256) into one of ``dimensions``
    buckets, stop words left out; a text without words is the zero vector."""
    vector = [0.0] * dimensions
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word not in STOP:
            vector[int(hashlib.sha256(word[:5].encode()).hexdigest(), 16) % dimensions] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def verdict(value: str, rationale: str = "stand-in rationale") -> str:
    return json.dumps({"verdict": value, "rationale": rationale})


class Fault:
    """One scripted answer: an HTTP status (``429``, ``500``), ``"malformed"`` JSON, ``"empty"``
    (valid JSON of the wrong shape), ``"slow"`` (sleep ``seconds``, then answer normally),
    ``"text"`` (a fixed reply ``text``), or ``"raw"``: the reply's JSON text as ``body`` gives it,
    ``{text}``, ``{in}`` and ``{out}`` replaced by the JSON of the reply text and the token counts
    (``body`` may also be a function of the wire, ``"openai"`` or ``"anthropic"``, returning bytes)."""

    def __init__(self, kind: int | str, seconds: float = 0.0, *, retry_after: str | None = None, text: str = "",
                 body=None):
        self.kind, self.seconds, self.retry_after, self.text, self.body = kind, seconds, retry_after, text, body


def reply_text(text: str) -> Fault:
    return Fault("text", text=text)


def raw_reply(wire: str, text: str = "{text}", tokens_in: str = "{in}", tokens_out: str = "{out}",
              extra: str = "") -> str:
    """A reply's JSON text with its parts given as JSON texts, so they may be what no JSON writer
    makes (NaN, 1e400, a lone surrogate escape, a key twice)."""
    if wire == "openai":
        return ('{"id": "chatcmpl-standin", "object": "chat.completion", "choices": [{"index": 0, '
                f'"finish_reason": "stop", "message": {{"role": "assistant", "content": {text}}}}}], "usage": '
                f'{{"prompt_tokens": {tokens_in}, "completion_tokens": {tokens_out}}}{extra}}}')
    return ('{"id": "msg_standin", "type": "message", "role": "assistant", "content": [{"type": "text", '
            f'"text": {text}}}], "stop_reason": "end_turn", "usage": {{"input_tokens": {tokens_in}, '
            f'"output_tokens": {tokens_out}}}{extra}}}')


def _deep(wire: str) -> str:
    return raw_reply(wire, extra=', "trace": ' + "[" * 100_000 + "]" * 100_000)


def _cut_bytes(wire: str) -> bytes:
    """The body cut by the server in the middle of an emoji's four UTF-8 bytes."""
    text = json.dumps(json.dumps({"verdict": "pass", "rationale": "fine \U0001f600 end"}, ensure_ascii=False),
                      ensure_ascii=False)
    whole = raw_reply(wire, text=text, tokens_in="100", tokens_out="20").encode()
    return whole[:whole.index("\U0001f600".encode()) + 2]


def _duplicate(wire: str) -> str:
    """The reply text twice, a failing verdict first: a lenient reader keeps the last."""
    first = json.dumps(verdict("fail", "the first"))
    return raw_reply(wire, text=f'{first}, {json.dumps("content" if wire == "openai" else "text")}: {{text}}')


def _text(text: str):
    return lambda wire: raw_reply(wire, text=json.dumps(text))


HOSTILE = {
    # the reply text itself holds a lone surrogate (a JSON escape the server sent)
    "surrogate": Fault("raw", body=_text(verdict("pass", "kept") + " \ud800")),
    # the verdict's rationale ends in the first half of an emoji, as a reply cut at a token limit
    "cut_emoji": Fault("raw", body=_text(json.dumps({"verdict": "pass", "rationale": "cut in an emoji \ud83d"},
                                                    ensure_ascii=False))),
    "cut_bytes": Fault("raw", body=_cut_bytes),
    "nan": Fault("raw", body=lambda wire: raw_reply(wire, tokens_in="NaN")),
    "overflow": Fault("raw", body=lambda wire: raw_reply(wire, tokens_out="1e400")),
    "deep": Fault("raw", body=_deep),
    "duplicate": Fault("raw", body=_duplicate),
    "control": Fault("raw", body=_text(verdict("pass", "\x1b[2J\x1b]0;owned\x07 <script>alert(1)</script> "
                                                       "\x00\x08\x0c\x7f\x9b\u202e"))),
}


class StandIn:
    """The server and its script; use as a context manager."""

    def __init__(self, key: str | None = None, usage: tuple[int, int] = (100, 20)):
        self.key = key  # when set, requests must carry it (Bearer or x-api-key)
        self.usage = usage  # (input tokens, output tokens) reported for every reply
        self.faults: deque = deque()
        self.rules: list[tuple[str, str]] = []
        self.default = verdict("pass")
        self.requests: list[dict] = []
        self.replied: list[float] = []  # time.time() of every reply sent in full
        self.in_flight = self.max_in_flight = 0  # requests being answered at once
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> StandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def prompts(self) -> list[str]:
        """The user prompt of every request so far."""
        return [r["prompt"] for r in self.requests]

    def next_action(self, prompt: str) -> tuple[Fault | None, str]:
        with self.lock:
            fault = self.faults.popleft() if self.faults else None
        if fault is not None and fault.kind == "text":
            return None, fault.text
        for marker, text in self.rules:
            if marker in prompt:
                return (text, self.default) if isinstance(text, Fault) and fault is None else (fault, text)
        return fault, self.default


def _handler(standin: StandIn) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: tests read the recorded requests instead
            pass

        def send(self, status: int, body: bytes, headers: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def error(self, status: int, message: str, headers: dict | None = None) -> None:
            self.send(status, json.dumps({"error": {"message": message}}).encode(), headers)

        def do_POST(self) -> None:
            with standin.lock:
                standin.in_flight += 1
                standin.max_in_flight = max(standin.max_in_flight, standin.in_flight)
            try:
                self.answer()
            finally:
                with standin.lock:
                    standin.in_flight -= 1

        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            wire = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic",
                    "/v1/embeddings": "embeddings"}.get(self.path)
            if wire is None:
                return self.error(404, f"no route {self.path}")
            if wire == "embeddings":
                return self.embeddings(body)
            prompt = body["messages"][-1]["content"] if body.get("messages") else ""
            system = (body.get("system") if wire == "anthropic"
                      else next((m["content"] for m in body.get("messages", ()) if m["role"] == "system"), None))
            with standin.lock:
                standin.requests.append({"wire": wire, "headers": dict(self.headers), "body": body,
                                         "prompt": prompt, "system": system})
            given = (self.headers.get("Authorization", "").removeprefix("Bearer ") if wire == "openai"
                     else self.headers.get("x-api-key", ""))
            if standin.key is not None and given != standin.key:
                return self.error(401, "invalid api key")
            if wire == "anthropic" and (not self.headers.get("anthropic-version") or "max_tokens" not in body):
                return self.error(400, "anthropic-version header and max_tokens are required")
            fault, text = standin.next_action(prompt)
            if fault is not None:
                if isinstance(fault.kind, int):
                    headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                    return self.error(fault.kind, "scripted fault", headers)
                if fault.kind == "malformed":
                    return self.send(200, b'{"choices": [{"message": {"content": "trunc')
                if fault.kind == "empty":
                    return self.send(200, b'{"object": "nothing"}')
                if fault.kind == "slow":
                    time.sleep(fault.seconds)
            tokens_in, tokens_out = standin.usage
            if fault is not None and fault.kind == "raw":
                body = fault.body(wire) if callable(fault.body) else fault.body
                if isinstance(body, str):
                    body = (body.replace("{text}", json.dumps(text)).replace("{in}", str(tokens_in))
                            .replace("{out}", str(tokens_out)).encode())
                return self.send(200, body)
            if wire == "openai":
                reply = {"id": "chatcmpl-standin", "object": "chat.completion", "model": body.get("model"),
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": text}}],
                         "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                                   "total_tokens": tokens_in + tokens_out}}
            else:
                reply = {"id": "msg_standin", "type": "message", "role": "assistant", "model": body.get("model"),
                         "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                         "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}}
            try:
                self.send(200, json.dumps(reply).encode())
                self.wfile.flush()
                with standin.lock:
                    standin.replied.append(time.time())
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        def embeddings(self, body: dict) -> None:
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            with standin.lock:
                standin.requests.append({"wire": "embeddings", "headers": dict(self.headers), "body": body,
                                         "prompt": "\n".join(texts or []), "system": None})
            given = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if standin.key is not None and given != standin.key:
                return self.error(401, "invalid api key")
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or not body.get("model"):
                return self.error(400, "model and input (a string or a list of strings) are required")
            with standin.lock:
                fault = standin.faults.popleft() if standin.faults else None
            if fault is not None and isinstance(fault.kind, int):
                headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                return self.error(fault.kind, "scripted fault", headers)
            if fault is not None and fault.kind == "malformed":
                return self.send(200, b'{"data": [{"embedding": [0.1, ')
            tokens = sum(len(t.split()) for t in texts)
            reply = {"object": "list", "model": body["model"],
                     "data": [{"object": "embedding", "index": i, "embedding": bag_of_words(t)}
                              for i, t in enumerate(texts)],
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
            self.send(200, json.dumps(reply).encode())
            with standin.lock:
                standin.replied.append(time.time())

    return Handler
