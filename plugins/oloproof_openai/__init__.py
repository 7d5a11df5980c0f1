"""The ``openai`` provider: chat completions over httpx, for OpenAI and any compatible server.

``base_url`` points it at vLLM, Ollama, LM Studio or llama.cpp (``http://127.0.0.1:8000/v1``).
The key is read from the environment variable that ``api_key_env`` names (``null``: send none,
for a local server); it is never part of the options, the identity, the store or a message.
Timeouts, connection errors, 408, 409, 429 and 5xx are retried with exponential backoff and full
jitter, honouring Retry-After; a request still failing makes the judgment missing
(``provider_error: 429``). Prices per million tokens turn usage into cost. It also serves
embeddings (``POST {base_url}/embeddings``) for the ``similarity`` evaluator. docs/judges.md.
"""

from __future__ import annotations

from attrs import frozen

from oloproof import Embeddings, EvaluationError, JsonProvider, Reply, hookimpl, vectors_of


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


class OpenAIProvider(JsonProvider):
    """The openai wire format on the shared HTTP plumbing (key, retries, limits, cost)."""

    name = "openai"
    base_url_example = "http://host:port/v1"

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
        return self.reply(str(text), usage.get("prompt_tokens"), usage.get("completion_tokens"))

    def embed(self, texts: list[str]) -> Embeddings:
        """One vector per text from ``/embeddings`` (an embedding model's name as ``model``)."""
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        data = self.post(self.options.base_url.rstrip("/") + "/embeddings",
                         {"model": self.options.model, "input": list(texts)}, headers)
        vectors = vectors_of(data, len(texts))
        usage = (data.get("usage") or {}) if isinstance(data, dict) else {}
        spent = self.reply("", usage.get("prompt_tokens"), 0).usage
        return Embeddings(vectors=vectors, usage=spent)


@hookimpl
def oloproof_register_providers(registry):
    registry.add("openai", OpenAIProvider, options=Options)
