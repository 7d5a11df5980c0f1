"""A conversation in a cases file: a case with ``turns`` instead of ``input``, read into one plain
:class:`Case` a turn (``CONVERSATION#K``), every problem located. docs/conversations.md.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import Case

TURN_KEYS = ("input", "expected", "metadata", "needs_history")
TURN_EXAMPLE = '"turns": [{"input": {...}, "expected": {...}}, {"input": {...}, "needs_history": true}]'


def turn_id(conversation: str, turn: int) -> str:
    """The id of a conversation's turn case: ``refund-annual#2`` (turns count from 1)."""
    return f"{conversation}#{turn}"


def is_turn(case: Case) -> bool:
    """Whether ``case`` is a turn of a conversation read from ``turns`` (not a plain case)."""
    metadata = case.metadata
    if "conversation" not in metadata:  # every plain case: no more to look at
        return False
    turn, conversation = metadata.get("turn"), metadata.get("conversation")
    return (type(turn) is int and type(conversation) is str
            and case.id == turn_id(conversation, turn))


def conversation_of(case: Case) -> str:
    """The conversation a case belongs to: its own id for a plain case (a one-turn conversation)."""
    return case.metadata["conversation"] if is_turn(case) else case.id


def turn_of(case: Case) -> int:
    """The turn index of a case, from 1; a plain case is turn 1."""
    return case.metadata["turn"] if is_turn(case) else 1


def conversation_cases(obj: dict, where: str, at: str,
                       turn_where: Callable[[int], str] | None = None) -> list[Case]:
    """A checked record with ``turns`` as its turn cases, in order. ``turn_where(k)`` locates the
    k-th turn (a YAML file's line of it); without it every turn is located at the record."""
    conversation = obj["id"]
    if "input" in obj or "expected" in obj:
        key = "input" if "input" in obj else "expected"
        raise ConfigError(f"{at}.{key}: a conversation has turns, each with its own input and expected",
                          where=where, fix=f"move {key} into the turns ({TURN_EXAMPLE}), or remove turns")
    turns = obj["turns"]
    if type(turns) is not list or not turns:
        raise ConfigError(f"{at}.turns: expected a non-empty list of turns, got {turns!r}", where=where,
                          fix=f"write {TURN_EXAMPLE}")
    metadata = obj.get("metadata")
    if metadata is not None and type(metadata) is not dict or metadata is None and "metadata" in obj:
        raise ConfigError(f"{at}.metadata: expected a JSON object, got {metadata!r}", where=where,
                          fix='write "metadata": {...}')
    _no_reserved(metadata or {}, at, where, on_turn=", or set needs_history on the turn")
    cases = []
    for k, turn in enumerate(turns, 1):
        spot, here = f"{at}.turns[{k - 1}]", turn_where(k - 1) if turn_where is not None else where
        cases.append(_turn_case(turn, conversation, k, metadata or {}, spot, here))
    return cases


def _turn_case(turn: Any, conversation: str, k: int, metadata: Mapping, at: str, where: str) -> Case:
    if type(turn) is not dict:
        raise ConfigError(f"{at}: expected a turn object, got {turn!r}", where=where,
                          fix='write {"input": {...}, "expected": {...}} for each turn')
    for key in turn:
        if key not in TURN_KEYS:
            close = difflib.get_close_matches(key, TURN_KEYS, n=1)
            raise ConfigError(f"{at}.{key}: unknown field {key!r}", where=where,
                              fix=f"rename it to {close[0]!r}" if close else f"a turn has only {', '.join(TURN_KEYS)}")
    if "input" not in turn:
        raise ConfigError(f"{at}.input: missing input", where=where,
                          fix='add "input": {...}, the object passed to the system at this turn')
    for key in ("input", "expected", "metadata"):
        if key in turn and type(turn[key]) is not dict:
            raise ConfigError(f"{at}.{key}: expected a JSON object, got {turn[key]!r}", where=where,
                              fix=f'write "{key}": {{...}}')
    needs = turn.get("needs_history", False)
    if type(needs) is not bool:
        raise ConfigError(f"{at}.needs_history: expected true or false, got {needs!r}", where=where,
                          fix="write needs_history: true (YAML's yes/no are text)")
    own = turn.get("metadata", {})
    _no_reserved(own, at, where)
    return Case(id=turn_id(conversation, k), input=turn["input"], expected=turn.get("expected", {}),
                metadata={**metadata, **own, "conversation": conversation, "turn": k, "needs_history": needs},
                source=where if at.startswith("$.") else f"{where}: {at}")


def _no_reserved(metadata: Mapping, at: str, where: str, on_turn: str = "") -> None:
    """A located error for a metadata key Oloproof sets on every turn; ``on_turn``: the fix's
    addition for ``needs_history`` (a conversation's metadata: it belongs on the turn)."""
    for reserved in ("conversation", "turn", "needs_history"):
        if reserved in metadata:
            raise ConfigError(f"{at}.metadata.{reserved}: set by Oloproof for every turn", where=where,
                              fix=f"rename the key {reserved!r}" + (on_turn if reserved == "needs_history" else ""))


def check_turn_ids(cases: list[Case]) -> list[Case]:
    """``cases``, when no turn case's id (``refund#2``) is also another case's id."""
    if not any(is_turn(case) for case in cases):
        return cases
    seen: dict[str, str] = {}
    for case in cases:
        if case.id in seen:
            raise ConfigError(f"$.id: the id {case.id!r} is also a turn of a conversation (first at {seen[case.id]})",
                              where=case.source, fix="rename the case, or the conversation")
        seen[case.id] = case.source
    return cases
