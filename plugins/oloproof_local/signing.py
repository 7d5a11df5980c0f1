"""``oloproof store sign`` on the local store: adopting a store key without losing what was
stored before it. Every row whose plain checksum holds is signed with the key, in one transaction,
once ``store check`` with the key finds nothing but unsigned rows."""

from __future__ import annotations

from typing import Any

from oloproof import OloproofError, Untrusted, only_unsigned, resigned_run, resigned_value

from .integrity import check_store, raw
from .keys import key_text

FIX = ("run `oloproof store check` without the store key to list the damaged rows and `oloproof store repair` "
       "(also without it) to set them aside, then sign again")


def sign_store(store: Any) -> dict:
    """Sign the store's unsigned runs, cache values and objects with its key. Returns the counts
    signed and the check after; raises when there is no key or anything else is damaged."""
    if store.key is None:
        raise OloproofError("no store key is set, so there is nothing to sign with", where=store.shown,
                            fix="set OLOPROOF_STORE_KEY (or write the key to .oloproof/key) and run again")
    only_unsigned(check_store(store)["problems"], store.shown)
    signed = {"runs": 0, "cache": 0, "objects": 0}
    with store._guard(), store._lock, store._write():
        db, key = store.db, store.key
        try:
            for run_id, header, summary, seal in db.execute("SELECT id, header, summary, seal FROM runs").fetchall():
                rows = db.execute("SELECT idx, case_id, record FROM run_cases WHERE run_id = CAST(? AS TEXT) "
                                  "ORDER BY idx", (raw(run_id),)).fetchall()
                done = resigned_run(run_id, header, summary, seal, rows, key)
                if done is not None:
                    db.execute("UPDATE runs SET seal = ? WHERE id = CAST(? AS TEXT)", (done[0], raw(run_id)))
                    db.executemany("UPDATE run_cases SET checksum = ? WHERE run_id = CAST(? AS TEXT) AND idx = ?",
                                   [(checksum, raw(run_id), idx) for idx, checksum in done[1]])
                    signed["runs"] += 1
            for ns, cache_key, value, stored in db.execute("SELECT ns, key, value, checksum FROM cache").fetchall():
                new = resigned_value(stored, (ns, key_text(cache_key), value), key)
                if new is not None:
                    match = "?" if isinstance(cache_key, bytes) else "CAST(? AS TEXT)"  # a digest's 32 bytes, or text
                    db.execute(f"UPDATE cache SET checksum = ? WHERE ns = CAST(? AS TEXT) AND key = {match}",
                               (new, raw(ns), raw(cache_key)))
                    signed["cache"] += 1
            for object_id, kind, record, stored in db.execute("SELECT id, kind, record, checksum FROM objects").fetchall():
                new = resigned_value(stored, (object_id, kind, record), key)
                if new is not None:
                    db.execute("UPDATE objects SET checksum = ? WHERE id = CAST(? AS TEXT)", (new, raw(object_id)))
                    signed["objects"] += 1
        except Untrusted as exc:
            raise OloproofError(f"{exc} does not match its checksum: nothing was signed", where=store.shown,
                                fix=FIX) from None
    return {"store": store.shown, **signed, "after": check_store(store)}
