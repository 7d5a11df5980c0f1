"""``store check``'s core: every run's seal and rows and every cache value checked, the damage
counted and listed (a store's ``check()`` calls :func:`check_rows` with its raw rows)."""

from __future__ import annotations

from collections.abc import Iterable

from oloproof_core.storage.checksums import QUARANTINED, keyed, shown_text, valid_run_id, verdict
from oloproof_core.storage.runs import seal_of, seal_verdict


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
    unsigned_note = "it is not signed with the store key"
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
