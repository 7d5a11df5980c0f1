"""The ``similarity`` evaluator: the cosine between the embeddings of the answer and of the
expected answer, from an embeddings provider (``openai`` for any OpenAI-compatible
``/v1/embeddings`` server, ``replay`` offline).

With a ``threshold`` (default 0.8) a case passes when the cosine reaches it (metric
``proportion``), and the cosine is kept in the judgment's detail; with ``threshold: null`` the
cosine itself, clipped to [0, 1], is the score (metric ``mean``). Each vector is cached per (text,
model identity) in the judgment cache, so an expected answer shared by cases, or a text seen by
another run, is embedded once. Not a judge: no model reads the texts, and the score rests on the
embedding model named in the identity. Cases without an expected answer are excluded.
docs/judges.md.
"""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from oloproof import (ConfigError, EmbeddingCache, EvaluationError, Judgment, cosine, hookimpl, open_embedder,
                      select, text_of)


def _check_threshold(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1):
        raise ConfigError(f"threshold must be a number between -1 and 1, got {value!r}",
                          fix="write threshold: 0.8, or threshold: null for the cosine as a score", key="threshold")


@frozen(kw_only=True)
class Options:
    provider: str  # a provider that serves embeddings: openai, replay, or a plugin's
    model: str  # the embedding model (text-embedding-3-small, nomic-embed-text, ...)
    provider_options: dict[str, Any] = field(factory=dict)  # base_url, api_key_env, prices, ...
    criterion: str = "answer_similar"
    threshold: float | None = field(default=0.8, validator=_check_threshold)  # None: the cosine as a score
    field: str | None = "answer"  # a key of the output; None: the whole output
    expected_field: str = "answer"  # a key of the case's expected


class Similarity:
    """Cosine between the answer's and the expected answer's embeddings, against a threshold."""

    concurrent = True  # it waits on a service

    def __init__(self, options: Options):
        self.options = options
        self.provider, served = open_embedder(options.provider, options.model, options.provider_options,
                                              what="evaluator 'similarity'")
        self.identity = {"embeddings": served}
        self.embedder = EmbeddingCache(self.provider, served)
        self.metric = "mean" if options.threshold is None else "proportion"

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def bind_cache(self, cache: Any) -> None:
        """The runner gives the judgment cache: each vector is kept per (text, model identity)."""
        self.embedder.cache = cache

    def exclude(self, case: Any) -> str | None:
        return None if select(case.expected, self.options.expected_field) is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        answer = select(execution.output, self.options.field)
        if answer is None:
            return Judgment.failed("field_absent")
        expected = text_of(select(case.expected, self.options.expected_field))
        try:
            (got, want), usage, cached = self.embedder.vectors([text_of(answer), expected])
        except (TypeError, ValueError) as exc:
            raise EvaluationError(f"provider_error: unexpected_embedding: {exc}") from exc
        value = round(cosine(got, want), 6)
        detail = {"similarity": value, "model": self.options.model, "cached_texts": cached, "usage": usage}
        threshold = self.options.threshold
        if threshold is None:
            return Judgment.score(min(1.0, max(0.0, value)), **detail)
        return Judgment.of(value >= threshold, None if value >= threshold else "below_threshold",
                           threshold=threshold, **detail)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("similarity", Similarity, options=Options)
