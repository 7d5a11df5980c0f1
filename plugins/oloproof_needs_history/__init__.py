"""The ``needs_history`` slice: turns flagged ``needs_history: true`` in the cases (a follow-up
that cannot be answered without the conversation) against the rest (docs/conversations.md)."""

from __future__ import annotations

from typing import Any

from oloproof import ConfigError, hookimpl


class NeedsHistorySlice:
    name = "needs_history"

    def __init__(self, argument: str | None = None):
        if argument:
            raise ConfigError(f"slice 'needs_history' takes no field, got {argument!r}", fix="write `needs_history`")

    def key(self, case: Any, execution: Any) -> str | None:
        return "true" if case.metadata.get("needs_history") is True else "false"


@hookimpl
def oloproof_register_slices(registry):
    registry.add("needs_history", NeedsHistorySlice)
