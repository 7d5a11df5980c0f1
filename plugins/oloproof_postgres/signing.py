"""``oloproof store sign`` on the postgres store: adopting a store key without losing what was
stored before it. Every row whose plain checksum holds is signed with the key, in one transaction,
once ``store check`` with the key finds nothing but unsigned rows."""

from __future__ import annotations

from oloproof import OloproofError, Untrusted, only_unsigned, resigned_run, resigned_value

FIX = ("run `oloproof store check` without the store key to list the damaged rows and `oloproof store repair` "
       "(also without it) to set them aside, then sign again")


class Signing:
    """``sign`` (a part of ``PostgresStore``)."""

    def sign(self) -> dict:
        """Sign the store's unsigned runs, cache values and objects with its key. Returns the
        counts signed and the check after; raises when there is no key or anything else is damaged."""
        if self.key is None:
            raise OloproofError("no store key is set, so there is nothing to sign with", where=self.shown,
                                fix="set OLOPROOF_STORE_KEY (or write the key to .oloproof/key) and run again")
        only_unsigned(self.check()["problems"], self.shown)
        signed = {"runs": 0, "cache": 0, "objects": 0}
        s, key = self.schema, self.key

        def work(conn) -> None:
            signed.update(runs=0, cache=0, objects=0)  # a retried transaction counts again
            conn.execute(f"LOCK TABLE {s}.runs, {s}.run_cases, {s}.cache, {s}.objects IN SHARE ROW EXCLUSIVE MODE")
            for run_id, header, summary, seal in conn.execute(f"SELECT id, header, summary, seal FROM {s}.runs").fetchall():
                rows = conn.execute(f"SELECT idx, case_id, record FROM {s}.run_cases WHERE run_id = %s ORDER BY idx",
                                    (run_id,)).fetchall()
                done = resigned_run(run_id, header, summary, seal, rows, key)
                if done is not None:
                    conn.execute(f"UPDATE {s}.runs SET seal = %s WHERE id = %s", (done[0], run_id))
                    with conn.cursor() as cursor:
                        cursor.executemany(f"UPDATE {s}.run_cases SET checksum = %s WHERE run_id = %s AND idx = %s",
                                           [(checksum, run_id, idx) for idx, checksum in done[1]])
                    signed["runs"] += 1
            for ns, cache_key, value, stored in conn.execute(f"SELECT ns, key, value, checksum FROM {s}.cache").fetchall():
                new = resigned_value(stored, (ns, cache_key, value), key)
                if new is not None:
                    conn.execute(f"UPDATE {s}.cache SET checksum = %s WHERE ns = %s AND key = %s", (new, ns, cache_key))
                    signed["cache"] += 1
            for object_id, kind, record, stored in conn.execute(
                    f"SELECT id, kind, record, checksum FROM {s}.objects").fetchall():
                new = resigned_value(stored, (object_id, kind, record), key)
                if new is not None:
                    conn.execute(f"UPDATE {s}.objects SET checksum = %s WHERE id = %s", (new, object_id))
                    signed["objects"] += 1

        try:
            self._write(work)
        except Untrusted as exc:
            raise OloproofError(f"{exc} does not match its checksum: nothing was signed", where=self.shown,
                                fix=FIX) from None
        return {"store": self.shown, **signed, "after": self.check()}
