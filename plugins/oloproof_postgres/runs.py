"""The postgres store's runs: streamed in (``begin_run`` registers the writer and takes its advisory
lock, ``PostgresWriter`` copies in chunks of case rows no reader sees and writes the run row with
its seal that makes them visible), and read back checked against that seal: the header and summary,
the cases a page at a time, or one case."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Iterator
from typing import Any

from oloproof import (
    listed_runs,
    ConfigError,
    OloproofError,
    RunWriter,
    checked_case,
    checked_seal,
    damaged_run,
    keyed,
    sealed_records,
    this_process,
    valid_run_id,
    write_run,
)


class Runs:
    """Writing and reading runs (a part of ``PostgresStore``)."""

    def begin_run(self, run_id: str) -> PostgresWriter:
        """A writer for a new run (``add``, ``finish``, ``abort``). It holds an advisory lock on a
        connection of its own while the run is written: the server releases it when the process
        dies, which is how ``check`` and the next ``begin_run`` tell an abandoned run from one still
        being written (the next ``begin_run`` removes the abandoned ones' rows)."""
        host, pid = this_process()
        lock = self._connect()
        try:
            with self._guard():
                lock.execute("SELECT pg_advisory_lock(%s)", (self._lock_key(run_id),))

            def work(conn) -> None:
                if conn.execute(f"SELECT 1 FROM {self.schema}.runs WHERE id = %s", (run_id,)).fetchone():
                    raise OloproofError(f"run {run_id} is stored already", where=self.shown, fix="give the run a new id")
                # this run's own writer row, left by an interrupted attempt (a `store copy` retried):
                # its lock is ours now, so that writer is gone
                self._remove_unfinished(conn, run_id)
                for other, in conn.execute(f"SELECT run_id FROM {self.schema}.writers ORDER BY run_id").fetchall():
                    if conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (self._lock_key(other),)).fetchone()[0]:
                        self._remove_unfinished(conn, other)
                conn.execute(f"INSERT INTO {self.schema}.writers (run_id, started, host, pid) VALUES (%s, %s, %s, %s)",
                             (run_id, time.time(), host, pid))

            self._write(work)
        except BaseException:
            lock.close()
            raise
        return PostgresWriter(self, run_id, lock, self.key)

    def _lock_key(self, run_id: str) -> int:
        """The advisory lock of a run being written (a signed 64-bit key, per schema and run)."""
        digest = hashlib.sha256(f"oloproof {self.options.schema} {run_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def _remove_unfinished(self, conn, run_id: str) -> None:
        """Delete the case rows and the writer of a run that was never finished."""
        conn.execute(f"DELETE FROM {self.schema}.run_cases WHERE run_id = %s "
                     f"AND NOT EXISTS (SELECT 1 FROM {self.schema}.runs WHERE id = %s)", (run_id, run_id))
        conn.execute(f"DELETE FROM {self.schema}.writers WHERE run_id = %s", (run_id,))

    def save_run(self, header: dict, cases: Iterable[dict], summary: dict) -> None:
        """Write a whole run (``cases`` any iterable, read once): it is stored whole, or its rows
        are removed again and no reader ever sees them."""
        write_run(self.begin_run(header["id"]), header, cases, summary)

    def resolve_run(self, prefix: str) -> str:
        """The one run id that starts with ``prefix`` (``run_`` may be left out); ``latest`` is the
        newest run that is not a diagnosis's child run."""
        if prefix == "latest":
            # the newest valid run id without a parent; a damaged one is an error, never an older run
            with self._conn() as conn, self._guard():
                rows = conn.execute(f"SELECT id FROM {self.schema}.runs WHERE parent IS NULL AND id LIKE 'run\\_%%' "
                                    "ORDER BY id DESC LIMIT 50").fetchall()
            row = next((r for r in rows if valid_run_id(r[0])), None)
            if row is None:
                raise ConfigError(f"no run in {self.shown} yet", fix="start one with `oloproof run`")
            self.get_run(row[0])
            return row[0]
        if not prefix.startswith("run_"):
            prefix = "run_" + prefix
        with self._conn() as conn, self._guard():
            ids = [r[0] for r in conn.execute(f"SELECT id FROM {self.schema}.runs WHERE id >= %s AND id < %s "
                                              "ORDER BY id LIMIT 50",
                                              (prefix, prefix + "\uffff"))]
        ids = [run_id for run_id in ids if valid_run_id(run_id)][:2]
        if not ids:
            raise ConfigError(f"no run {prefix} in {self.shown}", fix="list the runs with `oloproof runs`")
        if len(ids) > 1:
            raise ConfigError(f"{prefix} is ambiguous: it starts more than one run", fix="give more characters of the run id")
        return ids[0]

    def _seal(self, run_id: str, header: str, summary: str, seal: str) -> dict:
        """The run's seal, after checking its header and summary against it; with the store key,
        a seal not made with it is refused."""
        return checked_seal(run_id, header, summary, seal, self.key, self.shown, self._damaged)

    def get_run(self, run_id: str) -> tuple[dict, dict]:
        with self._conn() as conn, self._guard():
            row = conn.execute(f"SELECT header, summary, seal FROM {self.schema}.runs WHERE id = %s", (run_id,)).fetchone()
        if row is None or not valid_run_id(run_id):
            raise ConfigError(f"no run {run_id}", fix="list the runs with `oloproof runs`")
        self._seal(run_id, *row)
        return json.loads(row[0]), json.loads(row[1])

    def _head(self, run_id: str) -> dict:
        """The finished run's seal, or ConfigError for no such run."""
        with self._conn() as conn, self._guard():
            head = conn.execute(f"SELECT header, summary, seal FROM {self.schema}.runs WHERE id = %s", (run_id,)).fetchone()
        if head is None or not valid_run_id(run_id):
            raise ConfigError(f"no run {run_id}", fix="list the runs with `oloproof runs`")
        return self._seal(run_id, *head)

    def run_cases(self, run_id: str) -> Iterator[dict]:
        """The run's case records in case order, read in pages after checking every row against
        the run's seal (storage.sealed_records): memory stays one page whatever the run's size."""
        seal = self._head(run_id)

        def page(after: int, size: int) -> list:
            # a range of idx (a run's are 0, 1, 2, ...), not LIMIT: with LIMIT and the statistics of
            # a table that just grew, the planner may sort all the rest of the run for every page
            with self._conn() as conn, self._guard():
                return conn.execute(f"SELECT idx, case_id, record FROM {self.schema}.run_cases WHERE run_id = %s "
                                    "AND idx > %s AND idx <= %s ORDER BY idx", (run_id, after, after + size)).fetchall()

        return sealed_records(page, seal, lambda problem: damaged_run(run_id, problem, self.shown), key=self.key)

    def run_case(self, run_id: str, case_id: str) -> dict | None:
        """One case record of a finished run by its case id (None when the run has no such case),
        checked against its row's checksum (storage.checked_case)."""
        seal = self._head(run_id)
        with self._conn() as conn, self._guard():
            row = conn.execute(f"SELECT idx, record, checksum FROM {self.schema}.run_cases WHERE run_id = %s "
                               "AND case_id = %s ORDER BY idx LIMIT 1", (run_id, case_id)).fetchone()
        key = self.key if keyed(seal.get("meta")) else None
        return checked_case(run_id, case_id, row, lambda: self.run_cases(run_id), self.shown, key)

    def list_runs(self) -> list[dict]:
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT id, header, summary, seal FROM {self.schema}.runs ORDER BY id").fetchall()
        return listed_runs(self, rows)


class PostgresWriter(RunWriter):
    """A run being written to the postgres store (``PostgresStore.begin_run``): each ``add`` one
    transaction of its own (COPY), or a part of the open batch; ``lock`` is the connection that
    holds the run's writer lock until the run is finished or aborted."""

    def __init__(self, store: Any, run_id: str, lock, key: bytes | None = None):
        super().__init__(run_id, key)
        self.store, self.lock = store, lock

    def _insert(self, rows: list) -> None:
        store = self.store
        into = f"COPY {store.schema}.run_cases (run_id, idx, case_id, record, checksum) FROM STDIN"

        def work(conn) -> None:
            with conn.cursor() as cur, cur.copy(into) as copy:
                for row in rows:
                    copy.write_row((self.run_id, *row))

        store._write(work)

    def _finish(self, header: str, summary: str, seal: str) -> None:
        store = self.store
        parent = json.loads(header).get("parent") or None

        def work(conn) -> None:
            conn.execute(f"INSERT INTO {store.schema}.runs (id, created, parent, header, summary, seal) "
                         "VALUES (%s, %s, %s, %s, %s, %s)", (self.run_id, time.time(), parent, header, summary, seal))
            conn.execute(f"DELETE FROM {store.schema}.writers WHERE run_id = %s", (self.run_id,))

        store._write(work)
        self.lock.close()

    def _remove(self) -> None:
        try:
            self.store._write(lambda conn: self.store._remove_unfinished(conn, self.run_id))
        finally:
            self.lock.close()
