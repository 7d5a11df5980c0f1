"""The ``http`` system: send each case's input as a JSON body to a service and read its response.

``output_path`` picks the output, each ``artifacts`` entry records a dotted path of the response
as that artifact type. Header values may name environment variables (``${API_KEY}``); their
values are never part of the identity, the store, logs or exports. Connection errors, timeouts,
invalid JSON, 408, 429 (honouring Retry-After) and 5xx are retried with exponential backoff and
full jitter; a case still failing after the retries is missing (``http_error: 503``). Requests go
through aiohttp's own client session; docs/http.md has every option and the measurements behind
the client.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
from collections.abc import Callable
from typing import Any

from attrs import field, frozen

from oloproof import ArtifactError, CaseMissing, ConfigError, digest, hookimpl, is_refusal, retry_after, strict_json
from oloproof_http.overrides import check_places, passages, with_overrides

ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@frozen(kw_only=True)
class Options:
    url: str
    output_path: str | None = None  # a dotted path of the response; None: the whole response
    artifacts: dict[str, str] = field(factory=dict)  # artifact type -> dotted path of the response
    method: str = "POST"
    headers: dict[str, str] = field(factory=dict)  # values may use ${ENV_VAR}
    timeout: float = 30.0  # seconds for one attempt, connecting to reading the whole body
    retries: int = 3  # attempts after the first
    backoff: float = 0.5  # seconds before the first retry; doubles each time, with full jitter
    max_backoff: float = 30.0  # the longest wait between attempts, Retry-After included
    concurrency: int | None = None  # requests in flight; the suite's concurrency when unset
    requests_per_second: float | None = None
    max_response_bytes: int = 10_000_000  # a larger response body is not read: the case is missing
    # context / top_k / token_budget -> where the request takes it: a dotted body path or header:NAME
    interventions: dict[str, str] = field(factory=dict)
    # a conversation's later turn: the dotted body path that carries its earlier turns
    history_path: str = "history"


JSON = {"Content-Type": "application/json"}
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # no header value may carry these (CR/LF above all)


def expand(value: str, where: str) -> str:
    """``${NAME}`` replaced by the environment variable NAME, which must be set and not empty;
    the result must be a valid header value. The value itself is never in a message."""

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"{where} uses ${{{name}}}, but the environment variable {name} is not set",
                              fix=f"export {name}=... before running")
        if not os.environ[name].strip():
            raise ConfigError(f"{where} uses ${{{name}}}, but the environment variable {name} is empty",
                              fix=f"export {name}=... with its value before running")
        if CONTROL.search(os.environ[name]):
            raise ConfigError(f"{where} uses ${{{name}}}, whose value holds a control character (a line break?)",
                              fix=f"export {name} without line breaks or control characters")
        return os.environ[name]

    if CONTROL.search(value):
        raise ConfigError(f"{where} holds a control character (a line break?)", fix="write the value on one line")
    expanded = ENV.sub(one, value)
    try:
        expanded.encode("latin-1")
    except UnicodeEncodeError:
        raise ConfigError(f"{where} holds a character a header cannot carry", fix="use ASCII in header values") from None
    return expanded


def check(options: Options) -> None:
    """Options the YAML types cannot rule out, each with its fix."""
    if options.method.upper() not in ("POST", "PUT", "PATCH"):
        raise ConfigError(f"method {options.method!r} cannot carry the case input as a JSON body",
                          fix="use POST, PUT or PATCH")
    if not options.url.startswith(("http://", "https://")):
        raise ConfigError(f"url {options.url!r} is not an http(s) URL", fix="write http://host:port/path")
    for name in ("timeout", "requests_per_second"):
        value = getattr(options, name)
        if value is not None and value <= 0:
            raise ConfigError(f"{name} must be positive, got {value}", fix=f"write {name}: 10")
    for name, least in (("retries", 0), ("backoff", 0), ("max_backoff", 0), ("concurrency", 1),
                        ("max_response_bytes", 1)):
        value = getattr(options, name)
        if value is not None and value < least:
            raise ConfigError(f"{name} must be at least {least}, got {value}", fix=f"write {name}: {least}")
    check_places(options.interventions)
    if not options.history_path or any(not part for part in options.history_path.split(".")):
        raise ConfigError(f"history_path: {options.history_path!r} is not a dotted body path",
                          fix="write history_path: history (or conversation.turns)")


class RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart (one event loop: no lock needed)."""

    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self.next = 0.0

    async def wait(self) -> None:
        if self.interval:
            import asyncio

            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.interval
            if start > now:
                await asyncio.sleep(start - now)


def failure(exc: BaseException, url: str | None = None) -> str:
    """The missing reason of a request that got no response: ``timeout``, or
    ``connection_error: <the transport's exception> (<url>)``: the URL (without its query, which
    may carry a token, nor its user and password) says which service was down.

    aiohttp's exceptions name what happened (``ClientConnectorError``: refused, ``ClientOSError``:
    reset). An httpx client over the aiohttp transport maps every connection error to
    ``httpx.ConnectTimeout``; its cause says what really happened (a reset is not a timeout).
    """
    cause = exc.__cause__ if exc.__cause__ is not None and type(exc).__module__.startswith("httpx") else exc
    if isinstance(exc, TimeoutError) or isinstance(cause, TimeoutError) or "Timeout" in type(cause).__name__:
        return "timeout"
    where = ""
    if url:  # scheme, host, port and path: never a query or a user's password
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        host = parts.hostname or ""
        where = f" ({parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path})"
    return f"connection_error: {type(cause).__name__}{where}"


def client_maker(options: Options, headers: dict[str, str]) -> Callable[[], Any]:
    """What makes the run's client: an ``aiohttp.ClientSession`` with a pool of ``concurrency``
    connections, no cookie jar and no redirects (as httpx's defaults).

    aiohttp's own session costs a third of the CPU per request of an ``httpx.AsyncClient`` over
    aiohttp's pool (httpx's request and response objects, its cookie handling), so the per-case
    path uses it directly (docs/http.md has the measurements). ``make_client`` may also return an
    ``httpx.AsyncClient`` (any httpx transport, e.g. ``httpx.MockTransport``), sent through httpx's
    API.
    """
    import aiohttp

    def make() -> Any:
        connector = aiohttp.TCPConnector(limit=options.concurrency or 0, limit_per_host=0)
        # the total covers one attempt, connecting to reading the whole body; never rounded up
        # to a whole second (aiohttp's default above 5 s)
        timeout = aiohttp.ClientTimeout(total=options.timeout, ceil_threshold=float("inf"))
        return aiohttp.ClientSession(connector=connector, headers=headers, cookie_jar=aiohttp.DummyCookieJar(),
                                     timeout=timeout)

    return make


class HttpSystem:
    """One shared client per run; the runner drives ``aexecute`` on its event loop."""

    # the identity covers the request settings, never the service behind the URL: every run sends
    # every case again unless the suite says system.cache: reuse
    opaque = True
    # a service's own settings are unknown here: the top-k and token-budget interventions check
    # only that the value they send is a whole number
    top_k = depth = token_budget = None

    def __init__(self, options: Options, context: Any):
        check(options)
        self.options = options
        self.method = options.method.upper()
        self.headers = {k: expand(v, f"header {k}") for k, v in options.headers.items()}
        self.name = context.name or "http"
        declared = context.version or "0"
        # header names and their templates, never the expanded values
        self.identity = {"kind": "http", "name": self.name, "version": declared, "url": options.url,
                         "method": self.method, "output_path": options.output_path,
                         "artifacts": dict(options.artifacts), "headers": dict(options.headers)}
        if options.history_path != "history":  # the default keeps the identity of earlier runs
            self.identity["history_path"] = options.history_path
        self.version = f"{declared}+{digest(self.identity)[:12]}"
        self.records = frozenset(options.artifacts)
        self.concurrency = options.concurrency
        self.limiter = RateLimiter(options.requests_per_second)
        from yarl import URL  # the suite is being loaded: heavy imports belong here, never at import time

        try:
            self.url = URL(options.url)  # parsed once, not for every request
            if not self.url.host:
                raise ValueError("it names no host")
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"url {options.url!r} is not a valid URL: {exc}", fix="write http://host:port/path") from None
        self.make_client = client_maker(options, self.headers)
        self.client: Any = None
        self.bounded = False  # whether the client's own timeout bounds each attempt (bounds_attempts)

    async def aclose(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            await (client.aclose() if hasattr(client, "aclose") else client.close())

    async def aexecute(self, case: Any, recorder: Any, overrides: dict | None = None) -> Any:
        """Send the case (with ``overrides``, setting -> value, at their declared places) and
        record the response's artifacts."""
        traceparent = getattr(recorder, "traceparent", None)  # a traced run's (traces: otlp), sent along
        headers = {**JSON, "traceparent": traceparent} if traceparent else JSON
        payload = None
        places, values = dict(self.options.interventions), dict(overrides or {})
        if case.history:  # the earlier turns, each {"input": ..., "output": ...}, at history_path
            places["history"] = self.options.history_path
            values["history"] = case.history_data()
        if values:
            payload, extra = with_overrides(dict(case.input), places, values)
            headers = {**headers, **extra}
        body = await self.request(case, headers, payload)
        output = field_at(body, self.options.output_path, "output_path", "point output_path at the answer")
        for kind, path in self.options.artifacts.items():
            recorder.record(kind, field_at(body, path, f"artifacts.{kind}", f"point artifacts.{kind} at it"),
                            source=f"response field {path}")
        return output

    # -- what interventions call (system.http.interventions): each sends the request again ----

    def accepts(self, setting: str) -> bool:
        """Whether the request takes ``setting`` (``context``, ``top_k``, ``token_budget``)."""
        return setting in self.options.interventions

    async def rerun(self, case: Any, recorder: Any) -> Any:
        """The request unchanged (a control): the service answers afresh."""
        return await self.aexecute(case, recorder)

    async def generate_with(self, case: Any, context: Any, recorder: Any) -> Any:
        """The request with ``context``'s passages (the gold passages, say) as its context override."""
        return await self.aexecute(case, recorder, {"context": passages(context)})

    async def replay(self, case: Any, record: dict, recorder: Any, top_k: int | None = None,
                     rerank: Any = None, token_budget: int | None = None) -> Any:
        """The request with a top-k or a token budget override (unchanged without either: the
        control). A service retrieves again: there is no recorded retrieval to replay into it."""
        overrides = {k: v for k, v in (("top_k", top_k), ("token_budget", token_budget)) if v is not None}
        return await self.aexecute(case, recorder, overrides)

    async def request(self, case: Any, headers: dict[str, str] | None = None, payload: dict | None = None) -> Any:
        """The response's JSON, or CaseMissing with the last attempt's problem. A request that
        cannot be built, or a response too large to read, is not retried. ``payload``: the body
        to send instead of the case's input."""
        import asyncio  # here, not at import: every command loads the plugins, few send requests

        if self.client is None:  # made on the runner's event loop, which aiohttp binds to
            self.client = self.make_client()
            self.bounded = bounds_attempts(self.client, self.options.timeout)
        options = self.options
        try:
            sent = dict(case.input) if payload is None else payload
            content = json.dumps(sent, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise CaseMissing(f"request_error: the input is not JSON: {exc}") from None
        for attempt in range(options.retries + 1):
            if self.limiter.interval:
                await self.limiter.wait()
            wait = None
            try:
                if self.bounded:  # the client's own timeout ends the attempt: no second timer
                    status, got, body = await self.send(content, headers or JSON)
                else:
                    async with asyncio.timeout(options.timeout):
                        status, got, body = await self.send(content, headers or JSON)
            except TooLarge as exc:
                raise CaseMissing(f"response_too_large: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - sorted below: a transport failure is retried
                if local(exc):
                    raise CaseMissing(f"request_error: {type(exc).__name__}: {exc}") from None
                problem = failure(exc, options.url)
            else:
                if 200 <= status < 300:
                    try:  # strictly: no NaN, no number past a float, no duplicate key, bounded depth
                        return strict_json(body)
                    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError alike
                        problem = f"invalid_json: {exc}" if is_refusal(exc) else "invalid_json"
                elif status in (408, 429) or status >= 500:
                    problem = f"http_error: {status}"
                    wait = retry_after(got)
                else:  # any other status: sending the same request again would get the same answer
                    raise CaseMissing(f"http_error: {status}")
            if attempt < options.retries:
                backoff = random.uniform(0, min(options.max_backoff, options.backoff * 2 ** attempt))
                await asyncio.sleep(backoff if wait is None else min(wait, options.max_backoff))
        raise CaseMissing(problem)

    async def send(self, content: bytes, sent: dict[str, str] = JSON) -> tuple[int, Any, bytes]:
        """One attempt: the status, the headers and the body, read no further than
        ``max_response_bytes``."""
        if not hasattr(self.client, "stream"):  # aiohttp's session
            async with self.client.request(self.method, self.url, data=content, headers=sent,
                                           allow_redirects=False) as response:
                headers = response.headers
                declared = headers.get("Content-Length", "")
                # a plain body of a declared length within the limit is read at once; a compressed
                # or chunked one is counted as it is read (its declared length says nothing of it)
                if (declared.isdigit() and int(declared) <= self.options.max_response_bytes
                        and "Content-Encoding" not in headers and "Transfer-Encoding" not in headers):
                    return response.status, headers, await response.read()
                return response.status, headers, await self.body(headers, response.content.iter_any())
        async with self.client.stream(self.method, str(self.url), content=content, headers=sent) as response:
            return response.status_code, response.headers, await self.body(response.headers, response.aiter_bytes())

    async def body(self, headers: Any, chunks: Any) -> bytes:
        """The response body from its chunks; TooLarge past ``max_response_bytes``, declared or read."""
        limit = self.options.max_response_bytes
        declared = headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise TooLarge(f"{declared} bytes, over max_response_bytes {limit}")
        parts, size = [], 0
        async for chunk in chunks:
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"over max_response_bytes {limit}")
            parts.append(chunk)
        return b"".join(parts)



def bounds_attempts(client: Any, seconds: float) -> bool:
    """Whether ``client`` ends each attempt after ``seconds`` by itself: an aiohttp session whose
    total timeout (never rounded up) is that. Else each attempt runs under ``asyncio.timeout``."""
    timeout = getattr(client, "timeout", None)
    return (type(timeout).__module__.startswith("aiohttp") and getattr(timeout, "total", None) == seconds
            and getattr(timeout, "ceil_threshold", 0) >= seconds)


class TooLarge(Exception):
    """A response body over ``max_response_bytes``: not read further, not retried."""


def local(exc: BaseException) -> bool:
    """Whether an attempt failed before anything was sent, for a reason a retry cannot change (a
    request that cannot be built). Timeouts, refused and reset connections are not local."""
    module = type(exc).__module__
    if module.startswith("httpx"):
        import httpx

        return isinstance(exc, (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL))
    if isinstance(exc, (TimeoutError, OSError)):
        return False
    return not module.startswith(("aiohttp", "asyncio"))


def field_at(body: Any, path: str | None, option: str, fix: str) -> Any:
    """The value at a dotted path of the response (an integer part indexes a list); ArtifactError if absent."""
    value = body
    for i, part in enumerate(path.split(".") if path else ()):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            where = f"{'.'.join(path.split('.')[:i])} is" if i else "the response is"
            raise ArtifactError(f"{option}: the response has no field {path!r}; {where} {describe(value)}",
                                fix=fix)
    return value


def describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)}" if value else "an empty object"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@hookimpl
def oloproof_register_systems(registry):
    registry.add("http", HttpSystem, options=Options, shorthand="url")
