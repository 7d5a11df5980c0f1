"""One page of a run's cases, searched, filtered and sorted: what ``store.query_cases`` answers
(the local store from an FTS5 index, PostgreSQL from a ``tsvector`` GIN index), and the scan
that answers it for a store without that method (``query_cases`` here), with the same meaning.

A query (every part optional):

- ``search``: words; a case matches when each word starts a word of its text: its id, metadata
  (``key=value``), input, expected, output (every trial's), missing reason, and each judgment's
  reason and rationale (``case_text``). Case and punctuation do not count.
- ``criterion`` and ``status``: the case's judgment of that criterion has that status (passed,
  failed, scored, missing, excluded); ``status`` alone: any judgment has it (``missing``: or the
  case is missing).
- ``failing``: criteria; the case fails or misses one of them, or is missing.
- ``sort``: ``case`` (the id) or a criterion (failed, missing, scored lowest first, passed,
  excluded, then the cases without it); the run's order breaks ties. ``desc`` reverses the whole
  order.

The answer: ``{"matching": n, "records": [...]}``, the ``limit`` records after ``offset``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

STATUSES = ("passed", "failed", "scored", "missing", "excluded")
RANK = {"failed": 0, "missing": 1, "scored": 2, "passed": 3, "excluded": 4, "": 5}
SORTS = ("case",)
WORD = re.compile(r"[^\W_]+")  # letters and digits: how FTS5 and the tsvector index split words


def status_of(judgment: dict) -> str:
    """passed / failed / scored / missing / excluded, for a stored judgment: a score (ndcg, mrr, a
    judge's grade) is ``scored``, neither passed nor failed, as the terminal and JUnit read it."""
    status = judgment.get("status")
    if status in ("missing", "excluded"):
        return status
    if status == "pass":
        return "passed"
    if status == "fail":
        return "failed"
    return "scored"


def dump_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def case_text(record: dict) -> str:
    """Everything a search reads of one case, lowercased: its id, metadata (``key=value``), input,
    expected, output (of every trial), missing reason, and each judgment's reason and rationale."""
    case = record.get("case") or {}
    metadata = case.get("metadata")
    parts = [str(record.get("id")), *(f"{k}={v}" for k, v in (metadata.items() if isinstance(metadata, dict) else ())),
             dump_text(case.get("input")), dump_text(case.get("expected")), dump_text(record.get("output")),
             str(record.get("missing") or "")]
    for trial in record.get("trials") or []:
        if isinstance(trial, dict):
            parts.append(dump_text(trial.get("output")))
    for judgment in (record.get("judgments") or {}).values():
        if isinstance(judgment, dict):
            detail = judgment.get("detail") if isinstance(judgment.get("detail"), dict) else {}
            parts += [str(judgment.get("reason") or ""), str(detail.get("rationale") or "")]
    return "\n".join(parts).lower()


def case_words(text: str) -> list[str]:
    """The words of a search (or of a case's text), lowercased, in order, each once."""
    return list(dict.fromkeys(WORD.findall(text.lower())))


def cells(record: dict) -> list[tuple[str, int, float]]:
    """``(criterion, status rank, value)`` of each judgment: what a sort or a status filter reads
    (a value that is not a number sorts as 0)."""
    out = []
    for criterion, judgment in (record.get("judgments") or {}).items():
        if isinstance(judgment, dict):
            value = judgment.get("value")
            out.append((criterion, RANK[status_of(judgment)],
                        float(value) if isinstance(value, (int, float)) and value == value else 0.0))
    return out


def checked_query(search: str | None = None, criterion: str | None = None, status: str | None = None,
                  failing: Iterable[str] | None = None, sort: str | None = None, desc: bool = False,
                  offset: int = 0, limit: int = 50) -> dict:
    """The query's parts as a store reads them (``status`` one of STATUSES, ``offset`` and
    ``limit`` not negative), or ValueError naming the part that is wrong."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {', '.join(STATUSES)}")
    if offset < 0 or limit < 0:
        raise ValueError("offset and limit must not be negative")
    return {"words": case_words(search or ""), "criterion": criterion or None, "status": status,
            "failing": list(failing) if failing is not None else None, "sort": sort or None, "desc": bool(desc),
            "offset": int(offset), "limit": int(limit)}


def matches(record: dict, q: dict, text: str | None = None) -> bool:
    """Whether one record answers the query ``q`` (``checked_query``)."""
    judgments = record.get("judgments") or {}
    status, criterion = q["status"], q["criterion"]
    if status and criterion:
        if criterion not in judgments or status_of(judgments[criterion]) != status:
            return False
    elif status:
        if not any(status_of(j) == status for j in judgments.values()) and not (
                status == "missing" and "missing" in record):
            return False
    if q["failing"] is not None and "missing" not in record and not any(
            c in judgments and status_of(judgments[c]) in ("failed", "missing") for c in q["failing"]):
        return False
    if q["words"]:
        have = case_words(text if text is not None else case_text(record))
        return all(any(w.startswith(term) for w in have) for term in q["words"])
    return True


def sort_key(record: dict, position: int, sort: str | None) -> tuple:
    if sort is None:
        return (position,)
    if sort == "case":
        return (str(record.get("id")), position)
    found = [c for c in cells(record) if c[0] == sort]
    return (found[0][1], found[0][2], position) if found else (RANK[""], 0.0, position)


def scan_cases(records: Iterable[dict], **query: Any) -> dict:
    """``query_cases`` by reading every record once (a store without the method): memory holds
    the matching cases' sort keys and one page of records, never the run."""
    q = checked_query(**query)
    keys = [sort_key(r, i, q["sort"]) for i, r in enumerate(records) if matches(r, q)]
    keys.sort(reverse=q["desc"])
    page = keys[q["offset"]: q["offset"] + q["limit"]]
    wanted = {key[-1]: n for n, key in enumerate(page)}
    return {"matching": len(keys), "wanted": wanted}


def query_cases(store: Any, run_id: str, **query: Any) -> dict:
    """One page of a run's cases (``{"matching": n, "records": [...]}``): the store's own
    ``query_cases`` (an index) when it has one, else a scan of ``run_cases`` with the same meaning."""
    own = getattr(store, "query_cases", None)
    if own is not None:
        return own(run_id, **query)
    found = scan_cases(store.run_cases(run_id), **query)
    wanted, page = found["wanted"], [None] * len(found["wanted"])
    if wanted:
        for position, record in enumerate(store.run_cases(run_id)):
            if position in wanted:
                page[wanted[position]] = record
    return {"matching": found["matching"], "records": page}
