"""Embeddings: providers that turn texts into vectors, for the ``similarity`` evaluator and the
near-duplicate filter of ``oloproof generate``.

An embeddings provider is a provider (``oloproof_register_providers``) with ``embed(texts) ->
Embeddings``; ``openai`` serves any OpenAI-compatible ``/v1/embeddings`` (OpenAI, vLLM, Ollama,
llama.cpp) and ``replay`` reads vectors from a file. :func:`open_embedder` finds one by name and
says so when the named provider serves no embeddings. Each vector is cached per (text, model
identity) through :class:`EmbeddingCache`. docs/judges.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from attrs import frozen

from oloproof_core.model.errors import ConfigError, EvaluationError
from oloproof_core.model.identity import digest


@frozen
class Embeddings:
    """What ``embed`` returns: one vector per text, in order, and the usage (tokens, cost when priced)."""

    vectors: tuple[tuple[float, ...], ...]
    usage: dict


def vectors_of(data: Any, count: int) -> tuple[tuple[float, ...], ...]:
    """The vectors of an OpenAI-style ``/embeddings`` response (``data[i].embedding``, by ``index``);
    EvaluationError when the response has another shape or another number of vectors."""
    try:
        rows = sorted(data["data"], key=lambda row: row.get("index", 0))
        vectors = tuple(tuple(float(x) for x in row["embedding"]) for row in rows)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise EvaluationError("provider_error: unexpected_response") from None
    if len(vectors) != count or any(not v for v in vectors):
        raise EvaluationError(f"provider_error: {len(vectors)} embeddings for {count} texts")
    return vectors


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors of one length; 0.0 when either is all zeros."""
    if len(a) != len(b):
        raise EvaluationError(f"embeddings of different lengths ({len(a)} and {len(b)})")
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def identified_provider(name: str, model: str, options: Mapping[str, Any] | None = None, *,
                        what: str = "a generator") -> tuple[Any, dict]:
    """The provider ``name`` for ``model`` (:func:`~oloproof_core.engine.providers.open_provider`)
    and its identity: provider, model, the provider's distribution, version and code, and what it
    serves beyond its options (a replies file's sha256). Raises ConfigError as ``open_provider`` does."""
    from oloproof_core.engine.providers import _open, provider_code

    entry, provider = _open(name, model, options, what=what, registry=None)
    identity = {"provider": name, "model": model, "provider_plugin": provider_code(entry, provider)}
    served = getattr(provider, "identity", None)
    if served:
        identity["provider_identity"] = dict(served)
    return provider, identity


def open_embedder(name: str, model: str, options: Mapping[str, Any] | None = None, *,
                  what: str = "an evaluator") -> tuple[Any, dict]:
    """The provider ``name`` serving embeddings of ``model``, and its identity
    (:func:`identified_provider`).

    Raises ConfigError, before anything runs, for an unknown provider, bad options, missing
    credentials, or a provider without ``embed``."""
    provider, identity = identified_provider(name, model, options, what=what)
    if not callable(getattr(provider, "embed", None)):
        raise ConfigError(f"{what}: provider {name!r} serves no embeddings",
                          fix="use provider: openai (any OpenAI-compatible /v1/embeddings server) or replay")
    return provider, identity


class EmbeddingCache:
    """Vectors of one embedder, cached per (text, model identity) in a ``get``/``put`` cache (the
    judgment cache the runner binds, or a dict), fetched in one request for the texts not cached."""

    def __init__(self, provider: Any, identity: Mapping[str, Any], cache: Any = None):
        self.provider, self.cache = provider, cache
        self.model = digest(dict(identity))

    def key(self, text: str) -> str:
        return digest({"embedding": self.model, "text": text})

    def vectors(self, texts: Sequence[str]) -> tuple[list[tuple[float, ...]], dict, int]:
        """``(vectors, usage, cached)``: one vector per text, the usage of the request made (if
        any), and how many came from the cache."""
        found: dict[str, tuple[float, ...]] = {}
        if self.cache is not None:
            for text in dict.fromkeys(texts):
                hit = self.cache.get(self.key(text))
                if hit is not None:
                    found[text] = tuple(hit)
        wanted = [t for t in dict.fromkeys(texts) if t not in found]
        usage: dict = {}
        if wanted:
            made = self.provider.embed(wanted)
            if len(made.vectors) != len(wanted):
                raise EvaluationError(f"provider_error: {len(made.vectors)} embeddings for {len(wanted)} texts")
            usage = dict(made.usage or {})
            for text, vector in zip(wanted, made.vectors):
                found[text] = tuple(vector)
                if self.cache is not None:
                    self.cache.put(self.key(text), list(vector))
        cached = sum(1 for t in dict.fromkeys(texts) if t not in wanted)
        return [found[t] for t in texts], usage, cached
