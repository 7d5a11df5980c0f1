"""The local store's integrity: the seal of a run, the checksum of a value, and the check of the
whole store that ``oloproof store check`` prints."""

from __future__ import annotations

from typing import Any

from oloproof import OloproofError, checksum, seal_of

__all__ = ["check_store", "checksum", "seal_of"]


def check_store(store: Any) -> dict:
    """Verify everything stored: SQLite's own integrity check, every run against its seal, every
    cache value and object against its checksum. Returns the counts and the problems (one line
    each), and what was stored before seals existed and so could not be checked."""
    problems: list[str] = []
    counts = {"runs": 0, "cases": 0, "cache": 0, "objects": 0, "unverified": 0}
    with store._guard(), store._lock:
        verdict = [r[0] for r in store.db.execute("PRAGMA integrity_check").fetchall()]
        if verdict != ["ok"]:
            problems += [f"database: {line}" for line in verdict[:10]]
        runs = store.db.execute(f"SELECT id, header, summary, {store.seal} FROM runs ORDER BY id").fetchall()
        for run_id, header, summary, seal in runs:
            counts["runs"] += 1
            rows = store.db.execute("SELECT idx, case_id, record FROM run_cases WHERE run_id = ? ORDER BY idx",
                                   (run_id,)).fetchall()
            counts["cases"] += len(rows)
            if seal is None:
                counts["unverified"] += 1
                continue
            try:
                data = store._seal(run_id, header, summary, seal)
            except OloproofError:
                problems.append(f"run {run_id}: its header or summary does not match its seal")
                continue
            if len(rows) != data["cases"]:
                problems.append(f"run {run_id}: {len(rows)} case records, {data['cases']} stored")
            elif seal_of("", "", rows)["digest"] != data["digest"]:
                problems.append(f"run {run_id}: its case records do not match its seal")
        for ns, key, value, stored in store.db.execute(f"SELECT ns, key, value, {store.cache_sum} FROM cache"):
            counts["cache"] += 1
            if stored is None:
                counts["unverified"] += 1
            elif stored != checksum(ns, key, value):
                problems.append(f"cache {ns} {key[:16]}: its value does not match its checksum")
        for object_id, kind, record, stored in store.db.execute(f"SELECT id, kind, record, {store.object_sum} FROM objects"):
            counts["objects"] += 1
            if stored is None:
                counts["unverified"] += 1
            elif stored != checksum(object_id, kind, record):
                problems.append(f"{kind} {object_id}: its record does not match its checksum")
    return {"store": store.shown, "counts": counts, "problems": problems}
