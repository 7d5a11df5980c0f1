"""The local store's integrity: the check of the whole store that ``oloproof store check``
prints, with the runs that were begun and never finished, and ``oloproof store repair``."""

from __future__ import annotations

from typing import Any

from oloproof import PAGE, QUARANTINED, check_rows, checksum, process_gone, shown_text

from .keys import key_text
from .schema import COLUMNS

__all__ = ["check_store", "checksum", "repair_store"]


def raw(text: Any) -> Any:
    """A text the store read (undecodable bytes kept as surrogate escapes: see Tables) as the
    parameter that finds its row again: its exact bytes, compared through ``CAST(? AS TEXT)``."""
    return text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text


def check_store(store: Any, detail: dict | None = None) -> dict:
    """Verify everything stored: SQLite's own integrity check, then every run against its seal
    (its case rows read a page at a time) and every cache value and object against its checksum
    (the shared ``check_rows``). Returns the counts and the problems (one line each), what was
    stored before seals existed and so could not be checked, and the unfinished runs: case rows
    of a run begun and never finished, which no reader sees (not damage). A row whose text is not
    UTF-8 is read as bytes (and fails its checksum): every damaged row is listed."""
    problems = []
    with store._guard(), store._lock:
        verdict = [r[0] for r in store.db.execute("PRAGMA integrity_check").fetchall()]
        if store.path.exists() and store.path.stat().st_size == 0:
            problems.append("database: the file is empty (0 bytes): whatever it held is lost")
        elif store.missing:  # read-only, a database without the store's tables reads as empty: say why
            problems += (["database: the file holds none of the store's tables: whatever it held is lost"]
                         if len(store.missing) == len(COLUMNS) else
                         [f"database: table {table} is missing" for table in store.missing])
        problems += [f"database: {line}" for line in verdict[:10]] if verdict != ["ok"] else []

        def rows(run_id: str):
            after = -1
            while True:
                page = store.db.execute("SELECT idx, case_id, record FROM run_cases WHERE run_id = CAST(? AS TEXT) "
                                        "AND idx > ? ORDER BY idx LIMIT ?", (raw(run_id), after, PAGE)).fetchall()
                yield from page
                if len(page) < PAGE:
                    return
                after = page[-1][0]

        def runs():
            for run_id, header, summary, seal in store.db.execute(
                    f"SELECT id, header, summary, {store.seal} FROM runs ORDER BY id").fetchall():
                yield run_id, header, summary, seal, rows(run_id)

        counts, found = check_rows(
            runs(), ((ns, key_text(key), value, stored) for ns, key, value, stored
                     in store.db.execute(f"SELECT ns, key, value, {store.cache_sum} FROM cache")),
            store.db.execute(f"SELECT id, kind, record, {store.object_sum} FROM objects"), key=store.key, detail=detail)
        unfinished, orphans = unfinished_runs(store)
    counts["unfinished"] = len(unfinished)
    found += [f"run {shown_text(run_id)}: case records without their run" for run_id in orphans]
    if detail is not None:
        detail["orphans"] = orphans
    return {"store": store.shown, "counts": counts, "problems": problems + found, "unfinished": unfinished}


def repair_store(store: Any) -> dict:
    """``oloproof store repair``: remove every damaged cache value (the next run recomputes it),
    quarantine every damaged run (renamed ``quarantined:RUN_ID``, case rows and all: listed by
    no command, counted by ``store check``, kept for whoever wants to look at it) and remove case
    rows without their run, in one transaction. Returns what was done."""
    from .keys import stored_key

    detail: dict = {}
    before = check_store(store, detail)
    with store._guard(), store._lock, store._write():
        for ns, key in detail.get("cache", []):
            stored = stored_key(key)
            if isinstance(stored, bytes):
                store.db.execute("DELETE FROM cache WHERE ns = CAST(? AS TEXT) AND key = ?", (raw(ns), stored))
            else:
                store.db.execute("DELETE FROM cache WHERE ns = CAST(? AS TEXT) AND key = CAST(? AS TEXT)",
                                 (raw(ns), raw(stored)))
        for run_id in detail.get("runs", []):
            store.db.execute("UPDATE run_cases SET run_id = ? || run_id WHERE run_id = CAST(? AS TEXT)",
                             (QUARANTINED, raw(run_id)))
            store.db.execute("UPDATE runs SET id = ? || id WHERE id = CAST(? AS TEXT)", (QUARANTINED, raw(run_id)))
        for run_id in detail.get("orphans", []):
            store.db.execute("DELETE FROM run_cases WHERE run_id = CAST(? AS TEXT)", (raw(run_id),))
    after = check_store(store)
    return {"store": store.shown, "cache": len(detail.get("cache", [])), "runs": list(detail.get("runs", [])),
            "orphans": len(detail.get("orphans", [])), "before": before, "after": after}


def unfinished_runs(store: Any) -> tuple[list[dict], list[str]]:
    """Every run begun and not finished (its case rows, when its writer began it, and whether its
    process may still finish it: ``writing``; else the next run begun in the store removes it),
    and the ids of case rows with neither a run nor a writer (damage: a writer registers first)."""
    begun = store.db.execute("SELECT run_id, started, host, pid FROM writers WHERE run_id NOT IN (SELECT id FROM runs) "
                             "ORDER BY run_id").fetchall() if store.writers else []
    rows = dict(store.db.execute("SELECT run_id, COUNT(*) FROM run_cases WHERE run_id NOT IN (SELECT id FROM runs) "
                                 "GROUP BY run_id").fetchall())
    unfinished = [{"run": run_id, "cases": rows.pop(run_id, 0), "started": started,
                   "writing": not process_gone(host, pid)} for run_id, started, host, pid in begun]
    return unfinished, sorted(rows)
