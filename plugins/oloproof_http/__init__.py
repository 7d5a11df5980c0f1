"""The ``http`` system: POST each case's input as JSON to a service and read its response.

``output_path`` picks the output, each ``artifacts`` entry records a dotted path of the response
as that artifact type. Header values may name environment variables (``${API_KEY}``); their
values are never part of the identity, the store, logs or exports. Connection errors, timeouts,
429 (honouring Retry-After) and 5xx are retried with exponential backoff and full jitter; a
service still failing after the retries leaves the case missing (``http_error: 503``).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import re
import time
from typing import Any

from attrs import field, frozen

from oloproof import ArtifactError, CaseMissing, ConfigError, hookimpl, select

ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@frozen(kw_only=True)
class Options:
    url: str
    output_path: str | None = None
    artifacts: dict[str, str] = field(factory=dict)
    method: str = "POST"
    headers: dict[str, str] = field(factory=dict)
    timeout: float = 30.0
    retries: int = 3
    backoff: float = 0.5  # seconds before the first retry; doubles each time, with full jitter
    max_backoff: float = 30.0
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


class RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart."""

    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self.next = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self.lock:
            now = time.monotonic()
            delay = self.next - now
            self.next = max(now, self.next) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


class HttpSystem:
    """One shared client per run; the runner drives ``aexecute`` on its event loop."""

    def __init__(self, options: Options, context: Any):
        self.options = options
        if options.method.upper() not in ("POST", "PUT", "PATCH"):
            raise ConfigError(f"method {options.method!r} cannot carry the case input as a JSON body",
                              fix="use POST, PUT or PATCH")
        if not options.url.startswith(("http://", "https://")):
            raise ConfigError(f"url {options.url!r} is not an http(s) URL", fix="write http://host:port/path")
        self.headers = {k: expand(v, f"header {k}") for k, v in options.headers.items()}
        self.name = context.name or "http"
        declared = context.version or "0"
        identity = {"kind": "http", "name": self.name, "version": declared, "url": options.url,
                    "method": options.method.upper(), "output_path": options.output_path,
                    "artifacts": dict(options.artifacts),
                    # header names and their templates, never the expanded secret values
                    "headers": dict(options.headers)}
        from oloproof import digest

        self.identity = identity
        self.version = f"{declared}+{digest(identity)[:12]}"
        self.records = frozenset(options.artifacts)
        self.concurrency = options.concurrency
        self._client = None
        self._limiter: RateLimiter | None = None

    def _client_for_loop(self):
        if self._client is None:
            import httpx

            limit = self.concurrency or 64
            self._client = httpx.AsyncClient(timeout=self.options.timeout, headers=self.headers,
                                             limits=httpx.Limits(max_connections=limit,
                                                                 max_keepalive_connections=limit),
                                             transport=_transport(limit))
            self._limiter = RateLimiter(self.options.requests_per_second)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def aexecute(self, case: Any, recorder: Any) -> Any:
        body = await self._request(case)
        output = body if self.options.output_path is None else select(body, self.options.output_path)
        if output is None and self.options.output_path is not None:
            raise ArtifactError(f"the response has no field {self.options.output_path!r} (output_path); "
                                f"it has {describe(body)}", fix="point output_path at the field holding the answer")
        for kind, path in self.options.artifacts.items():
            value = select(body, path)
            if value is None:
                raise ArtifactError(f"{kind}: the response has no field {path!r}; {prefix_of(body, path)}",
                                    fix=f"point artifacts.{kind} at the field holding it")
            recorder.record(kind, value)
        return output

    async def _request(self, case: Any) -> Any:
        import httpx

        client = self._client_for_loop()
        options = self.options
        problem = "no attempt"
        for attempt in range(options.retries + 1):
            await self._limiter.wait()
            wait = None
            try:
                response = await client.request(options.method.upper(), options.url, json=dict(case.input))
            except httpx.TimeoutException:
                problem = "timeout"
            except httpx.TransportError as exc:
                problem = f"connection_error: {type(exc).__name__}"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    try:
                        return response.json()
                    except (json.JSONDecodeError, UnicodeDecodeError):
                        problem = "invalid_json"
                elif status == 429 or status >= 500:
                    problem = f"http_error: {status}"
                    wait = retry_after(response.headers.get("Retry-After")) if status in (429, 503) else None
                else:  # a client error: retrying would send the same request again
                    raise CaseMissing(f"http_error: {status}")
            if attempt < options.retries:
                backoff = min(options.max_backoff, options.backoff * 2 ** attempt)
                await asyncio.sleep(wait if wait is not None else random.uniform(0, backoff))
        raise CaseMissing(problem)  # still failing after every retry


def describe(body: Any) -> str:
    if isinstance(body, dict):
        return f"keys {sorted(body)}"
    return f"a {type(body).__name__}"


def prefix_of(body: Any, path: str) -> str:
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        found = select(body, ".".join(parts[:i]))
        if found is not None:
            return f"{'.'.join(parts[:i])} has {describe(found)}"
    return f"the response has {describe(body)}"


def _transport(limit: int):
    """The aiohttp-backed transport when installed (much cheaper per request than httpx's own)."""
    try:
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        return None
    return AiohttpTransport()


@hookimpl
def oloproof_register_systems(registry):
    registry.add("http", HttpSystem, options=Options, shorthand="url")
