"""The ``openai`` provider: chat completions over httpx, for OpenAI and any compatible server.

``base_url`` points it at vLLM, Ollama, LM Studio or llama.cpp (``http://127.0.0.1:8000/v1``).
The key is read from the environment variable that ``api_key_env`` names (``null``: send none,
for a local server); it is never part of the options, the identity, the store or a message.
Timeouts, connection errors, 408, 409, 429 and 5xx are retried with exponential backoff and full
jitter, honouring Retry-After; a request still failing makes the judgment missing
(``provider_error: 429``). Prices per million tokens turn usage into cost. docs/judges.md.
"""

from __future__ import annotations

import atexit
import contextlib
import email.utils
import os
import random
import threading
import time
from typing import Any

from attrs import frozen

from oloproof import ConfigError, EvaluationError, hookimpl

RETRIED = (408, 409, 429)  # and every 5xx


@frozen(kw_only=True)
class Options:
    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"  # the variable's name, never the key
    temperature: float = 0.0
    max_tokens: int | None = None  # None: the server's default
    seed: int | None = None
    json_mode: bool = False  # response_format {"type": "json_object"}, where the server has it
    timeout: float = 60.0  # seconds for one attempt
    retries: int = 4  # attempts after the first
    backoff: float = 1.0  # seconds before the first retry; doubles each time, with full jitter
    max_backoff: float = 60.0  # the longest wait between attempts, Retry-After included
    concurrency: int | None = None  # requests in flight; None: as many as the suite's concurrency
    price_per_million_input_tokens: float | None = None
    price_per_million_output_tokens: float | None = None


def check(options: Options) -> None:
    """Options the YAML types cannot rule out, each with its fix."""
    if not options.base_url.startswith(("http://", "https://")):
        raise ConfigError(f"base_url {options.base_url!r} is not an http(s) URL", fix="write http://host:port/v1")
    if options.timeout <= 0:
        raise ConfigError(f"timeout must be positive, got {options.timeout}", fix="write timeout: 60")
    for name, least in (("retries", 0), ("backoff", 0), ("max_backoff", 0), ("concurrency", 1), ("temperature", 0),
                        ("max_tokens", 1), ("price_per_million_input_tokens", 0), ("price_per_million_output_tokens", 0)):
        value = getattr(options, name)
        if value is not None and value < least:
            raise ConfigError(f"{name} must be at least {least}, got {value}", fix=f"write {name}: {least}")
    if (options.price_per_million_input_tokens is None) != (options.price_per_million_output_tokens is None):
        raise ConfigError("give both price_per_million_input_tokens and price_per_million_output_tokens, or neither",
                          fix="add the missing price (0 if that side is free)")


def read_key(name: str | None, provider: str) -> str | None:
    """The key from the environment; ConfigError naming the variable when it is not set."""
    if name is None:
        return None
    key = os.environ.get(name, "")
    if not key:
        raise ConfigError(f"the environment variable {name} is not set; the {provider} API key is read from it "
                          "(api_key_env)",
                          fix=f"export {name}=<your key>, or name another variable in provider_options.api_key_env")
    return key


def retry_after(headers: Any) -> float | None:
    """Seconds to wait from retry-after-ms or Retry-After (delta-seconds or an HTTP date)."""
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, float(headers.get("retry-after-ms")) / 1000)
    value = headers.get("retry-after")
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, float(value))
    with contextlib.suppress(TypeError, ValueError):
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    return None


@frozen
class Reply:
    text: str
    usage: dict


class OpenAIProvider:
    """One pooled client per judge, shared by the judging threads; closed when the process exits."""

    name = "openai"

    def __init__(self, options: Options):
        check(options)
        self.options, self.model = options, options.model
        self._key = read_key(options.api_key_env, self.name)
        self._slots = threading.BoundedSemaphore(options.concurrency) if options.concurrency else None
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"<{type(self).__name__} {self.model} at {self.options.base_url}>"

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=self.options.timeout)
                atexit.register(self._client.close)
            return self._client

    def complete(self, prompt: str, *, system: str | None = None) -> Reply:
        options = self.options
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        body: dict = {"model": options.model, "messages": messages, "temperature": options.temperature}
        for name, value in (("max_tokens", options.max_tokens), ("seed", options.seed)):
            if value is not None:
                body[name] = value
        if options.json_mode:
            body["response_format"] = {"type": "json_object"}
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        data = self.post(options.base_url.rstrip("/") + "/chat/completions", body, headers)
        try:
            text = data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise EvaluationError("provider_error: unexpected_response") from None
        usage = data.get("usage") or {}
        spent = {"input_tokens": int(usage.get("prompt_tokens") or 0),
                 "output_tokens": int(usage.get("completion_tokens") or 0)}
        if options.price_per_million_input_tokens is not None:
            spent["cost"] = (spent["input_tokens"] * options.price_per_million_input_tokens
                             + spent["output_tokens"] * options.price_per_million_output_tokens) / 1e6
        return Reply(text=str(text), usage=spent)

    def post(self, url: str, body: dict, headers: dict) -> Any:
        """The response's JSON, retrying what a later attempt may fix; EvaluationError otherwise."""
        import httpx

        options, problem = self.options, "provider_error: no_attempt"
        for attempt in range(options.retries + 1):
            wait = None
            try:
                with self._slots or contextlib.nullcontext():
                    response = self.client().post(url, json=body, headers=headers)
            except httpx.TimeoutException:
                problem = "provider_error: timeout"
            except httpx.TransportError as exc:
                problem = f"provider_error: connection_error: {type(exc).__name__}"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    try:
                        return response.json()
                    except ValueError:  # a reply was made (and maybe billed): not sent again
                        raise EvaluationError("provider_error: invalid_json") from None
                if status not in RETRIED and status < 500:  # the same request would fail the same way
                    raise EvaluationError(f"provider_error: {status}")
                problem, wait = f"provider_error: {status}", retry_after(response.headers)
            if attempt < options.retries:
                ceiling = min(options.max_backoff, options.backoff * 2 ** attempt)
                time.sleep(random.uniform(0, ceiling) if wait is None else min(wait, options.max_backoff))
        raise EvaluationError(problem)


@hookimpl
def oloproof_register_providers(registry):
    registry.add("openai", OpenAIProvider, options=Options)
