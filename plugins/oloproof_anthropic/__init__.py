"""The ``anthropic`` provider: the Messages API over httpx.

The key is read from the environment variable that ``api_key_env`` names and sent as
``x-api-key``; it is never part of the options, the identity, the store or a message. Timeouts,
connection errors, 408, 409, 429 and 5xx (529 overloaded included) are retried with exponential
backoff and full jitter, honouring Retry-After; a request still failing makes the judgment
missing (``provider_error: 529``). Prices per million tokens turn usage into cost. docs/judges.md.
"""

from __future__ import annotations

from attrs import frozen

from oloproof import EvaluationError, JsonProvider, Reply, hookimpl


@frozen(kw_only=True)
class Options:
    model: str
    base_url: str = "https://api.anthropic.com"
    api_key_env: str | None = "ANTHROPIC_API_KEY"  # the variable's name, never the key
    anthropic_version: str = "2023-06-01"
    temperature: float = 0.0
    max_tokens: int = 1024  # the API requires a limit
    timeout: float = 60.0  # seconds for one attempt
    retries: int = 4  # attempts after the first
    backoff: float = 1.0  # seconds before the first retry; doubles each time, with full jitter
    max_backoff: float = 60.0  # the longest wait between attempts, Retry-After included
    concurrency: int | None = None  # requests in flight; None: as many as the suite's concurrency
    price_per_million_input_tokens: float | None = None
    price_per_million_output_tokens: float | None = None


class AnthropicProvider(JsonProvider):
    """The anthropic wire format on the shared HTTP plumbing (key, retries, limits, cost)."""

    name = "anthropic"
    base_url_example = "https://api.anthropic.com"

    def complete(self, prompt: str, *, system: str | None = None) -> Reply:
        options = self.options
        body: dict = {"model": options.model, "max_tokens": options.max_tokens, "temperature": options.temperature,
                      "messages": [{"role": "user", "content": prompt}]}
        if system:
            body["system"] = system
        headers = {"anthropic-version": options.anthropic_version}
        if self._key:
            headers["x-api-key"] = self._key
        data = self.post(options.base_url.rstrip("/") + "/v1/messages", body, headers)
        try:
            text = "".join(block["text"] for block in data["content"] if block.get("type") == "text")
        except (KeyError, TypeError, AttributeError):
            raise EvaluationError("provider_error: unexpected_response") from None
        usage = data.get("usage") or {}
        return self.reply(text, usage.get("input_tokens"), usage.get("output_tokens"))


@hookimpl
def oloproof_register_providers(registry):
    registry.add("anthropic", AnthropicProvider, options=Options)
