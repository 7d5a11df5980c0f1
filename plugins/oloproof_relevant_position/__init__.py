"""The ``relevant_position`` slice: where the best relevant unit ranked, against top_k.

Groups: the rank of the best relevant unit (``1``, ``2``, ...) when the context's top_k cut kept
it, ``beyond_top_k`` when the cut left it out, ``not_retrieved``. Ranks count the deduplicated
units of the suite's ``relevance_unit`` (doc or chunk), as the at-k metrics do; whether a unit was
cut at top_k (which counts passages) is read from the recorded context. Unlabelled cases are left
out. Only a staged system declares top_k, so only it can be sliced.
"""

from __future__ import annotations

from typing import Any

from oloproof import ConfigError, hookimpl, observe


def needs_staged(name: str, system: Any) -> None:
    if getattr(system, "top_k", None) is None:
        raise ConfigError(f"slice '{name}' compares relevant positions with top_k, so it needs a staged system",
                          fix="use a system.rag system, or remove the slice")


class RelevantPosition:
    name = "relevant_position"

    def __init__(self, argument: str | None):
        if argument:
            raise ConfigError(f"slice 'relevant_position' takes no field, got {argument!r}",
                              fix="write relevant_position")
        self.top_k = None
        self.unit = "doc"

    def check(self, system: Any, relevance_unit: str = "doc") -> None:
        needs_staged(self.name, system)
        self.top_k = system.top_k
        self.unit = relevance_unit

    def key(self, case: Any, execution: Any) -> str | None:
        found = observe(case, execution, self.unit, self.top_k)
        if found.position == "unknown":
            return None
        if found.position is None:
            return "not_retrieved"
        return "beyond_top_k" if found.state == "beyond_top_k" else str(found.position)


@hookimpl
def oloproof_register_slices(registry):
    registry.add("relevant_position", RelevantPosition)
