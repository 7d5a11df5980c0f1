"""A conversation's turns in a stored run: the records a turn case's page shows as a transcript,
and the run page's cases table narrowed to one conversation.

A turn case's record names its conversation and turn (``case.metadata.conversation`` and
``case.metadata.turn``, its id ``CONVERSATION#K``); the other turns are found by their ids through
the store's one-case lookup (``run_case``), or, in a store without it, by one scan of the run.
Nothing here formats text or writes to the store.
"""

from __future__ import annotations

from typing import Any

from oloproof_core.config.turns import turn_id
from oloproof_core.model.records import LAST_TURN
from oloproof_core.storage.query import checked_query, matches, sort_key

MOST_TURNS = 1000  # a transcript stops here: a page is for reading, and ids are looked up one by one


def turn_of(record: dict) -> tuple[str, int] | None:
    """``(conversation, turn)`` of a turn case's record (``refund-annual#2``: ``("refund-annual",
    2)``); None for a plain case or a record that does not say both consistently."""
    case = record.get("case") if isinstance(record.get("case"), dict) else {}
    metadata = case.get("metadata") if isinstance(case.get("metadata"), dict) else {}
    conversation, turn = metadata.get("conversation"), metadata.get("turn")
    if type(conversation) is str and type(turn) is int and turn >= 1 and record.get("id") == turn_id(conversation, turn):
        return conversation, turn
    return None


def turn_records(store: Any, run_id: str, conversation: str, known: dict | None = None) -> list[dict]:
    """The recorded turns of ``conversation`` in the run, in turn order. ``known`` is a turn's
    record already read (not read again). Turns are looked up as ``CONVERSATION#1``, ``#2``, ...;
    a turn absent before ``known``'s (a run of a selection of cases) is passed over, and the first
    absent one after it ends the conversation."""
    lookup = getattr(store, "run_case", None)
    if lookup is None:  # no one-case lookup: the run is read once
        found = [r for r in store.run_cases(run_id) if (turn_of(r) or ("",))[0] == conversation]
        return sorted(found, key=lambda r: turn_of(r)[1])[:MOST_TURNS]
    at = turn_of(known)[1] if known is not None and turn_of(known) is not None else 0
    out = []
    for k in range(1, MOST_TURNS + 1):
        record = known if k == at else lookup(run_id, turn_id(conversation, k))
        if record is None or turn_of(record) != (conversation, k):
            if k < at:
                continue
            break
        out.append(record)
    return out


def conversation_verdicts(header: dict, records: list[dict]) -> list[dict]:
    """The conversation's verdicts of the conversation criteria (``X (all turns)``, and each
    ``scope: conversation`` evaluator's), each recorded on one turn (the last) and excluded from the
    others as ``judged_on_last_turn``: criterion, the judgment, and the judge's identity
    (``provider/model, prompt version``) when an LLM judged it."""
    named = [c for r in records for c, j in (r.get("judgments") or {}).items()
             if isinstance(j, dict) and j.get("reason") == LAST_TURN]
    out = []
    for criterion in dict.fromkeys(named):
        judged = [r["judgments"][criterion] for r in records if criterion in (r.get("judgments") or {})
                  and r["judgments"][criterion].get("reason") != LAST_TURN]
        if not judged:
            continue
        extra = ((header.get("evaluators") or {}).get(criterion) or {}).get("extra") or {}
        judge = (f"{extra['provider']}/{extra.get('model')}, prompt {extra.get('prompt_version')}"
                 if extra.get("provider") else None)
        out.append({"criterion": criterion, "judgment": judged[-1], "judge": judge})
    return out


def conversation_cases(store: Any, run_id: str, criteria: list[str], conversation: str, criterion: str | None,
                       status: str | None, search: str | None, sort: str | None, desc: bool) -> dict:
    """The cases table of one conversation (``/runs/RUN?conversation=ID``): its turns, or the plain
    case of that id (a conversation of one turn), searched, filtered and sorted with the meaning
    of ``query_cases`` (storage/query.py). A conversation is short: every turn is on one page."""
    records = turn_records(store, run_id, conversation)
    if not records:
        plain = (store.run_case(run_id, conversation) if hasattr(store, "run_case")
                 else next((r for r in store.run_cases(run_id) if r.get("id") == conversation), None))
        records = [plain] if plain is not None and turn_of(plain) is None else []
    q = checked_query(search=search, criterion=criterion if status else None, status=status, sort=sort, desc=desc)
    kept = sorted(((sort_key(r, i, q["sort"]), r) for i, r in enumerate(records) if matches(r, q)),
                  key=lambda pair: pair[0], reverse=q["desc"])
    return {"total": len(records), "matching": len(kept), "page": 1, "pages": 1, "records": [r for _, r in kept]}
