"""The ``context/v1`` artifact: the passages given to the model, the ones dropped, the budget."""

from __future__ import annotations

from typing import Any

from oloproof import ArtifactError, Context, ContextItem, DroppedItem, hookimpl

FIELDS = {ContextItem: ("doc_id", "position", "tokens", "text", "chunk_id"),
          DroppedItem: ("doc_id", "position", "reason", "chunk_id")}


def _item(cls: type, data: Any, at: str) -> Any:
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise ArtifactError(f"{at}: expected a {cls.__name__} or an object, got {data!r}")
    unknown = sorted(set(data) - set(FIELDS[cls]))
    if unknown:
        raise ArtifactError(f"{at}.{unknown[0]}: unknown field", fix=f"use {', '.join(FIELDS[cls])}")
    required = ("doc_id", "position", "reason") if cls is DroppedItem else ("doc_id", "position")
    absent = [k for k in required if k not in data]
    if absent:
        raise ArtifactError(f"{at}.{absent[0]}: missing", fix=f"give every item {' and '.join(required)}")
    try:
        return cls(**data)
    except (ArtifactError, TypeError) as exc:
        raise ArtifactError(f"{at}: {getattr(exc, 'problem', exc)}") from None


def _export(item: Any) -> dict:
    return {k: getattr(item, k) for k in FIELDS[type(item)] if getattr(item, k) is not None}


def _count(value: Any, at: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ArtifactError(f"{at}: expected a whole number >= 0, got {value!r}")


class ContextArtifact:
    """Validates and exports ``context/v1``: ``{items, dropped, token_budget, source}``."""

    def from_data(self, data: Any) -> Context:
        if isinstance(data, Context):
            return data
        if not isinstance(data, dict):
            raise ArtifactError(f"expected an object with items and dropped, got {data!r}")
        unknown = sorted(set(data) - {"items", "dropped", "token_budget", "source"})
        if unknown:
            raise ArtifactError(f"{unknown[0]}: unknown field", fix="use items, dropped, token_budget, source")
        for key in ("items", "dropped"):
            if not isinstance(data.get(key, []), (list, tuple)):
                raise ArtifactError(f"{key}: expected a list, got {data[key]!r}")
        return Context(items=[_item(ContextItem, d, f"items[{i}]") for i, d in enumerate(data.get("items", []))],
                       dropped=[_item(DroppedItem, d, f"dropped[{i}]") for i, d in enumerate(data.get("dropped", []))],
                       token_budget=data.get("token_budget"), source=data.get("source", "retrieval"))

    def to_data(self, value: Any) -> dict:
        context = self.from_data(value)
        for key, cls in (("items", ContextItem), ("dropped", DroppedItem)):
            for i, item in enumerate(getattr(context, key)):
                if not isinstance(item, cls):
                    raise ArtifactError(f"{key}[{i}]: expected a {cls.__name__}, got {item!r}")
        for i, item in enumerate(context.items):
            _count(item.tokens, f"items[{i}].tokens")
        _count(context.token_budget, "token_budget")
        if not isinstance(context.source, str) or not context.source:
            raise ArtifactError(f"source: expected a non-empty string, got {context.source!r}")
        return {"items": [_export(i) for i in context.items], "dropped": [_export(d) for d in context.dropped],
                "token_budget": context.token_budget, "source": context.source}


@hookimpl
def oloproof_register_artifacts(registry):
    registry.add("context/v1", ContextArtifact)
