"""The ``query_rewrite/v1`` artifact: what a system actually searched for at a turn of a
conversation (``{"query": "refund policy for annual plans"}``), beside the turn's own input, so a
follow-up whose retrieval ignored the conversation shows it (docs/conversations.md)."""

from __future__ import annotations

from typing import Any

from oloproof import ArtifactError, hookimpl


class QueryRewriteArtifact:
    """Validates and exports ``query_rewrite/v1``: ``{query: text}``; a bare text is the query."""

    def from_data(self, data: Any) -> dict:
        if isinstance(data, str):
            data = {"query": data}
        if not isinstance(data, dict):
            raise ArtifactError(f"expected an object with query, got {data!r}", fix='record {"query": "..."}')
        unknown = sorted(set(data) - {"query"})
        if unknown:
            raise ArtifactError(f"{unknown[0]}: unknown field", fix="query_rewrite/v1 has only query")
        if not isinstance(data.get("query"), str):
            raise ArtifactError(f"query: expected text, got {data.get('query')!r}",
                                fix="record the text the system searched for")
        return {"query": data["query"]}

    def to_data(self, value: Any) -> dict:
        return self.from_data(value)


@hookimpl
def oloproof_register_artifacts(registry):
    registry.add("query_rewrite/v1", QueryRewriteArtifact)
