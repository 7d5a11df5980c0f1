"""Reading relevance labels and recorded retrievals, for retrieval evaluators (builtin or not)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ConfigError
from .model import Case, Execution

UNITS = ("doc", "chunk")


def unit_key(item: Mapping, unit: str) -> str:
    """The unit a passage or label stands for: its doc_id, or ``doc_id#chunk_id`` for chunks."""
    if unit == "chunk" and item.get("chunk_id") is not None:
        return f"{item['doc_id']}#{item['chunk_id']}"
    return str(item["doc_id"])


def relevant_units(case: Case, unit: str = "doc") -> dict[str, float] | None:
    """``expected.relevant`` as {unit: grade} (grade defaults to 1), or None when unlabelled.

    With ``unit="doc"`` several labelled chunks of one document count as one unit, at their
    highest grade.
    """
    labels = case.expected.get("relevant")
    if labels is None:
        return None
    where = f"{case.source}: $.expected.relevant" if case.source else "$.expected.relevant"
    if not isinstance(labels, list):
        raise ConfigError(f"expected a list of {{doc_id, chunk_id?, grade?}}, got {labels!r}", where=where,
                          fix='write "relevant": [{"doc_id": "kb-01"}]')
    units: dict[str, float] = {}
    for i, label in enumerate(labels):
        if not isinstance(label, dict) or not isinstance(label.get("doc_id"), str) or not label["doc_id"]:
            raise ConfigError(f"item {i} needs a doc_id string, got {label!r}", where=where,
                              fix='write {"doc_id": "kb-01"}')
        grade = label.get("grade", 1)
        if isinstance(grade, bool) or not isinstance(grade, (int, float)) or grade < 0:
            raise ConfigError(f"item {i}: grade must be a number >= 0, got {grade!r}", where=where,
                              fix="write a grade such as 1 or 2")
        if unit == "chunk" and label.get("chunk_id") is None:
            raise ConfigError(f"item {i} has no chunk_id, and relevance_unit is chunk", where=where,
                              fix="add a chunk_id to every label, or use relevance_unit: doc")
        key = unit_key(label, unit)
        units[key] = max(units.get(key, 0.0), float(grade))
    return {k: g for k, g in units.items() if g > 0} if units else {}


def latest(execution: Execution, artifact_type: str) -> Mapping[str, Any] | None:
    """The last record of ``artifact_type`` the system recorded for this case, or None."""
    records = execution.artifacts.get(artifact_type)
    return records[-1] if records else None


def ranked_units(retrieval: Mapping[str, Any], unit: str = "doc") -> list[str]:
    """The units of a recorded ``retrieval/v1`` in the retriever's order, each once (first kept)."""
    seen: dict[str, None] = {}
    for passage in retrieval.get("candidates", ()):
        seen.setdefault(unit_key(passage, unit), None)
    return list(seen)
