"""``store check``'s core: every run's seal and rows and every cache value checked, the damage
counted and listed (a store's ``check()`` calls :func:`check_rows` with its raw rows)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from oloproof_core.storage.checksums import QUARANTINED, checksum, keyed, shown_text, valid_run_id, verdict
from oloproof_core.storage.runs import row_checksum, seal_of, seal_verdict

UNSIGNED = "it is not signed with the store key"  # a problem's end: a plain checksum where a key is set


def check_rows(runs: Iterable[tuple[str, str, str, str | None, Iterable]], cache: Iterable[tuple[str, str, str, str | None]],
               objects: Iterable[tuple[str, str, str, str | None]], key: bytes | None = None,
               detail: dict | None = None) -> tuple[dict, list[str]]:
    """Verify a store from its rows: each run ``(id, header, summary, seal, case rows)`` against
    its seal (its case rows ``(idx, case_id, record)`` any iterable, read once in case order), each
    cache value ``(ns, key, value, checksum)`` and object ``(id, kind, record, checksum)`` against
    its checksum (with the store ``key``: its HMAC; a plain checksum is then a problem, ``not signed``).
    Returns the counts and the problems, one line each. ``detail``, when given, receives what
    ``store repair`` needs: ``runs`` (the damaged run ids) and ``cache`` (``(ns, key)`` of the
    damaged values). A run whose id is not one oloproof makes is a problem; one ``store repair``
    quarantined is counted in ``quarantined``, not checked."""
    problems: list[str] = []
    counts = {"runs": 0, "cases": 0, "cache": 0, "objects": 0, "unverified": 0, "quarantined": 0}
    bad_runs: list = [] if detail is None else detail.setdefault("runs", [])
    bad_cache: list = [] if detail is None else detail.setdefault("cache", [])
    unsigned_note = UNSIGNED
    for run_id, header, summary, seal, rows in runs:
        if isinstance(run_id, str) and run_id.startswith(QUARANTINED):
            counts["quarantined"] += 1
            for _ in rows:  # read once, as promised
                pass
            continue
        counts["runs"] += 1
        if not valid_run_id(run_id):
            problems.append(f"run {shown_text(run_id)}: its id is not a run id oloproof makes")
            bad_runs.append(run_id)
            counts["cases"] += sum(1 for _ in rows)
            continue
        found_meta, data = seal_verdict(header, summary, seal, key, run_id)
        found = seal_of("", "", rows, key if found_meta == "ok" and keyed(data["meta"]) else None)  # one pass
        counts["cases"] += found["cases"]
        if found_meta == "unverified":
            counts["unverified"] += 1
            continue
        problem = None
        if found_meta == "unsigned":
            problem = unsigned_note
        elif data is None:
            problem = "its header or summary does not match its seal"
        elif found["cases"] != data["cases"]:
            problem = f"{found['cases']} case records, {data['cases']} stored"
        elif found["digest"] != data["digest"]:
            problem = "its case records do not match its seal"
        if problem is not None:
            problems.append(f"run {run_id}: {problem}")
            bad_runs.append(run_id)
    for ns, cache_key, value, stored in cache:
        counts["cache"] += 1
        found_sum = verdict(stored, (ns, cache_key, value), key)
        if found_sum == "unverified":
            counts["unverified"] += 1
        elif found_sum != "ok":
            problem = unsigned_note if found_sum == "unsigned" else "its value does not match its checksum"
            problems.append(f"cache {shown_text(ns, 40)} {shown_text(cache_key, 16)}: {problem}")
            bad_cache.append((ns, cache_key))
    for object_id, kind, record, stored in objects:
        counts["objects"] += 1
        found_sum = verdict(stored, (object_id, kind, record), key)
        if found_sum == "unverified":
            counts["unverified"] += 1
        elif found_sum != "ok":
            problem = unsigned_note if found_sum == "unsigned" else "its record does not match its checksum"
            problems.append(f"{shown_text(kind, 40)} {shown_text(object_id)}: {problem}")
    return counts, problems



def only_unsigned(problems: list[str], where: str) -> None:
    """``store sign``'s precondition: of what ``check()`` found with the key, nothing but rows that
    are not signed with it. Raises the error naming the first other problem."""
    from oloproof_core.model.errors import OloproofError

    others = [problem for problem in problems if not problem.endswith(UNSIGNED)]
    if others:
        raise OloproofError(f"the store is damaged besides its unsigned rows ({len(others)} damaged, the first: "
                            f"{others[0]}): nothing was signed", where=where,
                            fix="run `oloproof store check` to see them and `oloproof store repair` to set them aside, "
                                "then sign again")


class Untrusted(ValueError):
    """A row ``store sign`` found damaged as it re-signed it (written since its check)."""


def resigned_value(stored: str | None, parts: tuple[str, ...], key: bytes) -> str | None:
    """The keyed checksum of a cache value or object whose plain checksum holds; None when there
    is nothing to sign (already keyed, or stored before checksums). Raises :class:`Untrusted`
    when the plain checksum does not hold, or a keyed one does not."""
    found = verdict(stored, parts, key)
    if found in ("ok", "unverified"):
        return None
    if found == "unsigned" and verdict(stored, parts, None) == "ok":
        return checksum(*parts, key=key)
    raise Untrusted(f"{shown_text(parts[0], 40)} {shown_text(parts[1], 16)}")


def resigned_run(run_id: str, header: str, summary: str, seal: str | None, rows: list[tuple[int, str, str]],
                 key: bytes) -> tuple[str, list[tuple[int, str]]] | None:
    """A run with a plain seal that holds (its header, summary and case rows ``(idx, case_id,
    record)``, in order), signed: its keyed seal text and each row's keyed checksum ``(idx,
    checksum)``. None when there is nothing to sign (a keyed seal, no seal, a quarantined run).
    Raises :class:`Untrusted` when the plain seal does not hold."""
    if run_id.startswith(QUARANTINED):
        return None
    found, _ = seal_verdict(header, summary, seal, key, run_id)
    if found in ("ok", "unverified"):
        return None
    plain = seal_verdict(header, summary, seal, None, run_id)[1]
    if found != "unsigned" or plain is None or not valid_run_id(run_id) \
            or {k: plain.get(k) for k in ("cases", "digest")} != {k: v for k, v in seal_of("", "", rows).items()
                                                                 if k in ("cases", "digest")}:
        raise Untrusted(f"run {shown_text(run_id)}")
    signed = seal_of(header, summary, rows, key, run_id)
    return json.dumps(signed), [(idx, row_checksum(idx, case_id, record, key)) for idx, case_id, record in rows]
