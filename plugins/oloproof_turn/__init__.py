"""The ``turn`` slice: a conversation's turn cases grouped by their turn index (``turn=2``); a
case that is not a conversation's is turn 1 (docs/conversations.md)."""

from __future__ import annotations

from typing import Any

from oloproof import ConfigError, hookimpl


class TurnSlice:
    name = "turn"

    def __init__(self, argument: str | None = None):
        if argument:
            raise ConfigError(f"slice 'turn' takes no field, got {argument!r}", fix="write `turn`")

    def key(self, case: Any, execution: Any) -> str | None:
        turn = case.metadata.get("turn") if "conversation" in case.metadata else None
        return str(turn) if type(turn) is int else "1"


@hookimpl
def oloproof_register_slices(registry):
    registry.add("turn", TurnSlice)
