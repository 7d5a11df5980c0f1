"""The local store's integrity: the seal of a run, the checksum of a value, and the check of the
whole store that ``oloproof store check`` prints."""

from __future__ import annotations

from typing import Any

from oloproof import check_rows, checksum, seal_of

__all__ = ["check_store", "checksum", "seal_of"]


def check_store(store: Any) -> dict:
    """Verify everything stored: SQLite's own integrity check, then every run against its seal and
    every cache value and object against its checksum (the shared ``check_rows``). Returns the
    counts and the problems (one line each), and what was stored before seals existed and so could
    not be checked."""
    with store._guard(), store._lock:
        verdict = [r[0] for r in store.db.execute("PRAGMA integrity_check").fetchall()]
        problems = [f"database: {line}" for line in verdict[:10]] if verdict != ["ok"] else []

        def runs():
            for run_id, header, summary, seal in store.db.execute(
                    f"SELECT id, header, summary, {store.seal} FROM runs ORDER BY id").fetchall():
                rows = store.db.execute("SELECT idx, case_id, record FROM run_cases WHERE run_id = ? ORDER BY idx",
                                        (run_id,)).fetchall()
                yield run_id, header, summary, seal, rows

        counts, found = check_rows(
            runs(), store.db.execute(f"SELECT ns, key, value, {store.cache_sum} FROM cache").fetchall(),
            store.db.execute(f"SELECT id, kind, record, {store.object_sum} FROM objects").fetchall())
    return {"store": store.shown, "counts": counts, "problems": problems + found}
