"""The ``retrieval/v1`` artifact: what the retriever returned for a query, in its own order."""

from __future__ import annotations

from typing import Any

from oloproof import ArtifactError, Passage, Retrieval, hookimpl, retrieval_data


def _passage(data: Any, at: str) -> Passage:
    if isinstance(data, Passage):
        return data
    if not isinstance(data, dict):
        raise ArtifactError(f"{at}: expected an object with doc_id, got {data!r}")
    unknown = sorted(set(data) - {"doc_id", "score", "text", "chunk_id"})
    if unknown:
        raise ArtifactError(f"{at}.{unknown[0]}: unknown field", fix="a passage has doc_id, score, text, chunk_id")
    if "doc_id" not in data:
        raise ArtifactError(f"{at}.doc_id: missing", fix="give every candidate a doc_id")
    try:
        return Passage(**data)
    except (ArtifactError, TypeError) as exc:
        raise ArtifactError(f"{at}: {getattr(exc, 'problem', exc)}") from None


class RetrievalArtifact:
    """Validates and exports ``retrieval/v1``: ``{query, depth, candidates: [{doc_id, score?,
    text?, chunk_id?}]}``; positions are the candidates' order, from 1, never changed."""

    def from_data(self, data: Any) -> Retrieval:
        if isinstance(data, Retrieval):
            return data
        if not isinstance(data, dict):
            raise ArtifactError(f"expected an object with query, depth and candidates, got {data!r}")
        for key in ("depth", "candidates"):
            if key not in data:
                raise ArtifactError(f"{key}: missing", fix="record query, depth and candidates")
        if not isinstance(data["candidates"], (list, tuple)):
            raise ArtifactError(f"candidates: expected a list, got {data['candidates']!r}")
        candidates = tuple(_passage(p, f"candidates[{i}]") for i, p in enumerate(data["candidates"]))
        return Retrieval(query=data.get("query"), depth=data["depth"], candidates=candidates)

    def to_data(self, value: Any) -> dict:
        retrieval = self.from_data(value)
        for i, passage in enumerate(retrieval.candidates):
            if not isinstance(passage, Passage):
                raise ArtifactError(f"candidates[{i}]: expected a Passage, got {passage!r}")
            if passage.score is not None and (isinstance(passage.score, bool)
                                              or not isinstance(passage.score, (int, float))):
                raise ArtifactError(f"candidates[{i}].score: expected a number, got {passage.score!r}")
        if len(retrieval.candidates) > retrieval.depth:
            raise ArtifactError(f"candidates: {len(retrieval.candidates)} passages for depth {retrieval.depth}",
                                fix="record at most depth candidates, or the depth the retriever was asked for")
        return retrieval_data(retrieval)


@hookimpl
def oloproof_register_artifacts(registry):
    registry.add("retrieval/v1", RetrievalArtifact)
