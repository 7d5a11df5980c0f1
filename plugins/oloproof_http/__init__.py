"""The ``http`` system: send each case's input as a JSON body to a service and read its response.

``output_path`` picks the output, each ``artifacts`` entry records a dotted path of the response
as that artifact type. Header values may name environment variables (``${API_KEY}``); their
values are never part of the identity, the store, logs or exports. Connection errors, timeouts,
invalid JSON, 408, 429 (honouring Retry-After) and 5xx are retried with exponential backoff and
full jitter; a case still failing after the retries is missing (``http_error: 503``). docs/http.md
has every option and the measurements behind the transport.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from collections.abc import Callable
from typing import Any

from attrs import field, frozen

from oloproof import ArtifactError, CaseMissing, ConfigError, digest, hookimpl, retry_after

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


def expand(value: str, where: str) -> str:
    """``${NAME}`` replaced by the environment variable NAME, which must be set."""

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"{where} uses ${{{name}}}, but the environment variable {name} is not set",
                              fix=f"export {name}=... before running")
        return os.environ[name]

    return ENV.sub(one, value)


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
    for name, least in (("retries", 0), ("backoff", 0), ("max_backoff", 0), ("concurrency", 1)):
        value = getattr(options, name)
        if value is not None and value < least:
            raise ConfigError(f"{name} must be at least {least}, got {value}", fix=f"write {name}: {least}")


class RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart (one event loop: no lock needed)."""

    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self.next = 0.0

    async def wait(self) -> None:
        if self.interval:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.interval
            if start > now:
                await asyncio.sleep(start - now)


def failure(exc: BaseException) -> str:
    """The missing reason of a request that got no response.

    The aiohttp transport maps every connection error to ``httpx.ConnectTimeout``; its cause says
    what really happened (a reset is not a timeout).
    """
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    if isinstance(exc, TimeoutError) or isinstance(cause, TimeoutError) or "Timeout" in type(cause).__name__:
        return "timeout"
    return f"connection_error: {type(cause).__name__}"


def client_maker(options: Options, headers: dict[str, str]) -> Callable[[], Any]:
    """What makes the run's ``httpx.AsyncClient``, over aiohttp's connection pool.

    httpx's own pool costs more per request the more connections it holds (encode/httpx#3215); on
    aiohttp's, the same client sustains 6-12x the requests per second (docs/http.md).
    """
    import httpx
    from httpx_aiohttp import AiohttpTransport

    limits = httpx.Limits(max_connections=options.concurrency, max_keepalive_connections=options.concurrency)
    return lambda: httpx.AsyncClient(timeout=options.timeout, headers=headers,
                                     transport=AiohttpTransport(limits=limits))


class HttpSystem:
    """One shared client per run; the runner drives ``aexecute`` on its event loop."""

    # the identity covers the request settings, never the service behind the URL: every run sends
    # every case again unless the suite says system.cache: reuse
    opaque = True

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
        self.version = f"{declared}+{digest(self.identity)[:12]}"
        self.records = frozenset(options.artifacts)
        self.concurrency = options.concurrency
        self.limiter = RateLimiter(options.requests_per_second)
        import httpx  # the suite is being loaded: heavy imports belong here, never at import time

        try:
            self.url = httpx.URL(options.url)  # parsed once, not for every request
        except httpx.InvalidURL as exc:
            raise ConfigError(f"url {options.url!r} is not a valid URL: {exc}", fix="write http://host:port/path") from None
        self.make_client = client_maker(options, self.headers)
        self.client: Any = None

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None

    async def aexecute(self, case: Any, recorder: Any) -> Any:
        body = await self.request(case)
        output = field_at(body, self.options.output_path, "output_path", "point output_path at the answer")
        for kind, path in self.options.artifacts.items():
            recorder.record(kind, field_at(body, path, f"artifacts.{kind}", f"point artifacts.{kind} at it"),
                            source=f"response field {path}")
        return output

    async def request(self, case: Any) -> Any:
        """The response's JSON, or CaseMissing with the last attempt's problem."""
        if self.client is None:  # made on the runner's event loop, which aiohttp binds to
            self.client = self.make_client()
        options = self.options
        for attempt in range(options.retries + 1):
            await self.limiter.wait()
            wait = None
            try:
                async with asyncio.timeout(options.timeout):
                    response = await self.client.request(self.method, self.url, json=dict(case.input))
            except Exception as exc:  # noqa: BLE001 - no response at all: a transport failure, retried
                problem = failure(exc)
            else:
                status = response.status_code
                if 200 <= status < 300:
                    try:
                        return response.json()
                    except ValueError:  # json.JSONDecodeError and UnicodeDecodeError alike
                        problem = "invalid_json"
                elif status in (408, 429) or status >= 500:
                    problem = f"http_error: {status}"
                    wait = retry_after(response.headers)
                else:  # any other status: sending the same request again would get the same answer
                    raise CaseMissing(f"http_error: {status}")
            if attempt < options.retries:
                backoff = random.uniform(0, min(options.max_backoff, options.backoff * 2 ** attempt))
                await asyncio.sleep(backoff if wait is None else min(wait, options.max_backoff))
        raise CaseMissing(problem)


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
