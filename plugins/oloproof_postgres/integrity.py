"""The postgres store's integrity: the check of the whole store that ``oloproof store check``
prints, in one snapshot, with the runs that were begun and never finished."""

from __future__ import annotations

import contextlib

from oloproof import QUARANTINED, check_rows, shown_text

from .schema import damage


class Check:
    """Verifying everything stored (a part of ``PostgresStore``)."""

    def check(self, detail: dict | None = None) -> dict:
        """Verify everything stored, in one snapshot, streamed: the counts, one line a problem, and
        the runs begun and not finished (not damage: ``writing`` when their writer's process still
        holds its lock, else removed by the next run begun in the store). A schema without the
        store's tables, a table missing or a damaged schema version is damage too (``database: ...``)."""
        with self._connect() as conn, self._guard():
            broken, readable = damage(conn, self.options.schema)
        if broken and not readable:
            counts = {"runs": 0, "cases": 0, "cache": 0, "objects": 0, "unverified": 0}
            return {"store": self.shown, "counts": counts, "problems": broken, "unfinished": []}
        if broken and self._pool is None:  # every table there, its version row damaged: check the rows
            with self._open_lock:
                self._pool = self._pool or self._make_pool()
        with self._conn() as conn, self._guard(), contextlib.ExitStack() as cursors:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

            def rows(name: str, query: str):
                cursor = cursors.enter_context(conn.cursor(name=f"oloproof_check_{name}"))
                cursor.execute(query)
                return cursor

            s = self.schema
            begun = conn.execute(
                f"SELECT w.run_id, w.started, (SELECT COUNT(*) FROM {s}.run_cases c WHERE c.run_id = w.run_id) "
                f"FROM {s}.writers w WHERE NOT EXISTS (SELECT 1 FROM {s}.runs r WHERE r.id = w.run_id) "
                "ORDER BY w.run_id").fetchall()
            unfinished = [{"run": run_id, "cases": int(cases), "started": started, "writing": not self._writer_gone(conn, run_id)}
                          for run_id, started, cases in begun]
            orphans = [r[0] for r in conn.execute(
                f"SELECT DISTINCT run_id FROM {s}.run_cases c WHERE NOT EXISTS (SELECT 1 FROM {s}.runs r WHERE r.id = c.run_id) "
                f"AND NOT EXISTS (SELECT 1 FROM {s}.writers w WHERE w.run_id = c.run_id) ORDER BY run_id").fetchall()]

            def runs():
                # the case rows of finished runs, merged with the runs in id order ("C" collation:
                # code point order on both sides); each run's rows streamed to check_rows
                cases = rows("cases", f"SELECT run_id, idx, case_id, record FROM {s}.run_cases c "
                                      f"WHERE EXISTS (SELECT 1 FROM {s}.runs r WHERE r.id = c.run_id) ORDER BY run_id, idx")
                pending = [next(cases, None)]

                def run_rows(run_id: str):
                    while pending[0] is not None and pending[0][0] == run_id:
                        yield pending[0][1:]
                        pending[0] = next(cases, None)

                for run_id, header, summary, seal in rows("runs", f"SELECT id, header, summary, seal FROM {s}.runs ORDER BY id"):
                    yield run_id, header, summary, seal, run_rows(run_id)

            counts, problems = check_rows(runs(), rows("cache", f"SELECT ns, key, value, checksum FROM {s}.cache"),
                                          rows("objects", f"SELECT id, kind, record, checksum FROM {s}.objects"),
                                          key=self.key, detail=detail)
        problems += [f"run {shown_text(run_id)}: case records without their run" for run_id in orphans]
        if detail is not None:
            detail["orphans"] = orphans
        counts["unfinished"] = len(unfinished)
        return {"store": self.shown, "counts": counts, "problems": broken + problems, "unfinished": unfinished}

    def _writer_gone(self, conn, run_id: str) -> bool:
        """Whether no process holds the run's writer lock (taken and released in this transaction)."""
        return conn.execute("SELECT pg_try_advisory_xact_lock_shared(%s)", (self._lock_key(run_id),)).fetchone()[0]

    def repair(self) -> dict:
        """``oloproof store repair``: remove every damaged cache value, quarantine every damaged
        run (renamed ``quarantined:RUN_ID`` with its case rows) and remove case rows without their
        run or a writer, in one transaction. Returns what was done."""
        detail: dict = {}
        before = self.check(detail)
        s = self.schema

        def work(conn) -> None:
            for ns, key in detail.get("cache", []):
                conn.execute(f"DELETE FROM {s}.cache WHERE ns = %s AND key = %s", (ns, key))
            for run_id in detail.get("runs", []):
                conn.execute(f"UPDATE {s}.run_cases SET run_id = %s || run_id WHERE run_id = %s", (QUARANTINED, run_id))
                conn.execute(f"UPDATE {s}.runs SET id = %s || id WHERE id = %s", (QUARANTINED, run_id))
            for run_id in detail.get("orphans", []):
                conn.execute(f"DELETE FROM {s}.run_cases c WHERE run_id = %s AND NOT EXISTS "
                             f"(SELECT 1 FROM {s}.writers w WHERE w.run_id = c.run_id)", (run_id,))

        if detail.get("cache") or detail.get("runs") or detail.get("orphans"):
            self._write(work)
        return {"store": self.shown, "cache": len(detail.get("cache", [])), "runs": list(detail.get("runs", [])),
                "orphans": len(detail.get("orphans", [])), "before": before, "after": self.check()}
