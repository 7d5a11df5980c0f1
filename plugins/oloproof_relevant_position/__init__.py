"""The ``relevant_position`` slice: where the best relevant passage ranked, against top_k.

Groups: each position up to top_k (``1``, ``2``, ...), ``beyond_top_k``, ``not_retrieved``.
Unlabelled cases are left out. Only a staged system declares top_k, so only it can be sliced.
"""

from __future__ import annotations

from typing import Any

from oloproof import ConfigError, hookimpl, latest, relevant_units, unit_key


def needs_staged(name: str, system: Any) -> None:
    if getattr(system, "top_k", None) is None:
        raise ConfigError(f"slice '{name}' compares relevant positions with top_k, so it needs a staged system",
                          fix="use a system.rag system, or remove the slice")


def best_relevant_position(case: Any, execution: Any) -> int | None | str:
    """The retrieval position (from 1) of the best-ranked relevant passage; None if none was
    retrieved; ``"unlabelled"`` when the case has no relevance labels or nothing was recorded.

    The position is the candidate's own place in the recorded retrieval, the one top_k cuts at,
    so several chunks of one document each take a position.
    """
    relevant = relevant_units(case)
    retrieval = latest(execution, "retrieval/v1") if execution is not None else None
    if not relevant or retrieval is None:
        return "unlabelled"
    for position, passage in enumerate(retrieval.get("candidates", ()), 1):
        if unit_key(passage, "doc") in relevant:
            return position
    return None


class RelevantPosition:
    name = "relevant_position"

    def __init__(self, argument: str | None):
        if argument:
            raise ConfigError(f"slice 'relevant_position' takes no field, got {argument!r}",
                              fix="write relevant_position")
        self.top_k = None

    def check(self, system: Any) -> None:
        needs_staged(self.name, system)
        self.top_k = system.top_k

    def key(self, case: Any, execution: Any) -> str | None:
        position = best_relevant_position(case, execution)
        if position == "unlabelled":
            return None
        if position is None:
            return "not_retrieved"
        return str(position) if position <= self.top_k else "beyond_top_k"


@hookimpl
def oloproof_register_slices(registry):
    registry.add("relevant_position", RelevantPosition)
