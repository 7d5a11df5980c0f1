"""The typed artifacts a system records of its retrieval and context (``retrieval/v1``,
``context/v1``): frozen values, checked when made."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from oloproof_core.model.errors import ArtifactError
from oloproof_core.model.records import JSON, as_tuple


def _positive(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArtifactError(f"{type(instance).__name__}.{attribute.name} must be a positive integer, got {value!r}")


def _text(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ArtifactError(f"{type(instance).__name__}.{attribute.name} must be a non-empty string, got {value!r}")


@frozen(kw_only=True)
class Passage:
    """A retrieved passage; its position is its place in ``Retrieval.candidates`` (from 1)."""

    doc_id: str = field(validator=_text)
    score: float | None = None
    text: str | None = None
    chunk_id: str | None = None


@frozen(kw_only=True)
class Retrieval:
    """What the retriever returned for a query, in the retriever's own order."""

    query: JSON
    depth: int = field(validator=_positive)
    candidates: tuple[Passage, ...] = field(default=(), converter=as_tuple)


@frozen(kw_only=True)
class ContextItem:
    """A passage that went into the context given to the model, at its retrieval position."""

    doc_id: str = field(validator=_text)
    position: int = field(validator=_positive)
    tokens: int | None = None
    text: str | None = None
    chunk_id: str | None = None


@frozen(kw_only=True)
class DroppedItem:
    """A retrieved passage left out of the context, and why (``top_k``, ``token_budget``, ...)."""

    doc_id: str = field(validator=_text)
    position: int = field(validator=_positive)
    reason: str = field(validator=_text)
    chunk_id: str | None = None


@frozen(kw_only=True)
class Context:
    """The context given to the model: the items in, the items dropped, the budget."""

    items: tuple[ContextItem, ...] = field(default=(), converter=as_tuple)
    dropped: tuple[DroppedItem, ...] = field(default=(), converter=as_tuple)
    token_budget: int | None = None
    source: str = "retrieval"
