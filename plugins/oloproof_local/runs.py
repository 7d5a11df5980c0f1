"""The local store's runs: streamed in (``begin_run`` registers the writer, ``LocalWriter`` adds
chunks of case rows no reader sees and the run row with its seal that makes them visible), and
read back checked against that seal: the header and summary, the cases a page at a time, or one case."""

from __future__ import annotations

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
    process_gone,
    sealed_records,
    this_process,
    valid_run_id,
    write_run,
)


class Runs:
    """Writing and reading runs (a part of ``LocalStore``)."""

    def begin_run(self, run_id: str) -> LocalWriter:
        """A writer for a new run (``add``, ``finish``, ``abort``); first the rows of runs whose
        process ended before it finished them are removed."""
        host, pid = this_process()
        with self._guard(), self._lock, self._write():
            if self.db.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise OloproofError(f"run {run_id} is stored already", where=self.shown, fix="give the run a new id")
            for other, other_host, other_pid in self.db.execute("SELECT run_id, host, pid FROM writers").fetchall():
                if process_gone(other_host, other_pid):
                    self._remove_unfinished(other)
            if self.db.execute("SELECT 1 FROM writers WHERE run_id = ?", (run_id,)).fetchone():
                raise OloproofError(f"run {run_id} is being written by another process", where=self.shown,
                                    fix="wait for it to finish (or end), then run again")
            self.db.execute("INSERT INTO writers (run_id, started, host, pid) VALUES (?, ?, ?, ?)",
                            (run_id, time.time(), host, pid))
        return LocalWriter(self, run_id, self.key)

    def _remove_unfinished(self, run_id: str) -> None:
        """Delete the case rows and the writer of a run that was never finished."""
        self.db.execute("DELETE FROM run_cases WHERE run_id = ? AND NOT EXISTS (SELECT 1 FROM runs WHERE id = ?)",
                        (run_id, run_id))
        self.db.execute("DELETE FROM writers WHERE run_id = ?", (run_id,))

    def save_run(self, header: dict, cases: Iterable[dict], summary: dict) -> None:
        """Write a whole run (``cases`` any iterable, read once): it is stored whole, or its rows
        are removed again and no reader ever sees them."""
        write_run(self.begin_run(header["id"]), header, cases, summary)

    def resolve_run(self, prefix: str) -> str:
        """The one run id that starts with ``prefix`` (``run_`` may be left out); ``latest`` is the
        newest run that is not a diagnosis's child run."""
        if prefix == "latest":
            # the newest run that is not a child run: a damaged older run does not hide it, and a
            # damaged newest one is an error (never silently an older run)
            with self._guard(), self._lock:
                rows = self.db.execute(f"SELECT id, header, summary, {self.seal} FROM runs ORDER BY id DESC").fetchall()
            for run_id, header, summary, seal in rows:
                if not valid_run_id(run_id):
                    continue
                try:
                    parent = json.loads(header).get("parent")
                except (ValueError, AttributeError):
                    parent = None  # unreadable: checked below, and an error
                if not parent:
                    self._seal(run_id, header, summary, seal)
                    return run_id
            raise ConfigError(f"no run in {self.root.name}/ yet", fix="start one with `oloproof run`")
        if not prefix.startswith("run_"):
            prefix = "run_" + prefix
        with self._guard(), self._lock:
            ids = [r[0] for r in self.db.execute("SELECT id FROM runs WHERE id >= ? AND id < ? ORDER BY id",
                                                 (prefix, prefix + "\uffff")).fetchmany(50)]
        ids = [run_id for run_id in ids if valid_run_id(run_id)][:2]
        if not ids:
            raise ConfigError(f"no run {prefix} in {self.root.name}/", fix="list the runs with `oloproof runs`")
        if len(ids) > 1:
            raise ConfigError(f"{prefix} is ambiguous: it starts more than one run",
                              fix="give more characters of the run id")
        return ids[0]

    def _seal(self, run_id: str, header: str, summary: str, seal: str | None) -> dict | None:
        """The run's seal, after checking its header and summary against it (None: stored before
        seals existed); with the store key, a seal not made with it is refused."""
        return checked_seal(run_id, header, summary, seal, self.key, self.shown, self._damaged)

    def _head(self, run_id: str) -> tuple[str, str, dict | None]:
        """A finished run's header and summary (as stored) and its seal (None: stored before
        seals), checked; ConfigError for no such run (or one not finished)."""
        with self._guard(), self._lock:
            head = self.db.execute(f"SELECT header, summary, {self.seal} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if head is None or not valid_run_id(run_id):
            raise ConfigError(f"no run {run_id}", fix="list the runs with `oloproof runs`")
        return head[0], head[1], self._seal(run_id, *head)

    def get_run(self, run_id: str) -> tuple[dict, dict]:
        header, summary, _ = self._head(run_id)
        return json.loads(header), json.loads(summary)

    def run_cases(self, run_id: str) -> Iterator[dict]:
        """The run's case records in case order, read in pages after checking every row against
        the run's seal (storage.sealed_records): memory stays one page whatever the run's size."""
        seal = self._head(run_id)[2]

        def page(after: int, size: int) -> list:
            with self._guard(), self._lock:
                return self.db.execute("SELECT idx, case_id, record FROM run_cases WHERE run_id = ? AND idx > ? "
                                       "ORDER BY idx LIMIT ?", (run_id, after, size)).fetchall()

        return sealed_records(page, seal, lambda problem: damaged_run(run_id, problem, self.shown), key=self.key)

    def run_case(self, run_id: str, case_id: str) -> dict | None:
        """One case record of a finished run by its case id (None when the run has no such case),
        checked against its row's checksum (storage.checked_case)."""
        seal = self._head(run_id)[2]
        with self._guard(), self._lock:
            row = self.db.execute(f"SELECT idx, record, {self.case_sum} FROM run_cases WHERE run_id = ? AND case_id = ? "
                                  "ORDER BY idx LIMIT 1", (run_id, case_id)).fetchone()
        key = self.key if seal is not None and keyed(seal.get("meta")) else None
        return checked_case(run_id, case_id, row, lambda: self.run_cases(run_id), self.shown, key)

    def list_runs(self) -> list[dict]:
        """Every finished run's header, in id order; a damaged run (or one whose id oloproof never
        makes) is left out and its id added to ``damaged_runs``: it never hides the others."""
        with self._guard(), self._lock:
            rows = self.db.execute(f"SELECT id, header, summary, {self.seal} FROM runs ORDER BY id").fetchall()
        return listed_runs(self, rows)


class LocalWriter(RunWriter):
    """A run being written to the local store (``LocalStore.begin_run``): each ``add`` one
    transaction of its own (or a part of the open batch)."""

    def __init__(self, store: Any, run_id: str, key: bytes | None = None):
        super().__init__(run_id, key)
        self.store = store

    def _insert(self, rows: list) -> None:
        store = self.store
        with store._guard(), store._lock, store._write():
            store.db.executemany("INSERT INTO run_cases (run_id, idx, case_id, record, checksum) VALUES (?, ?, ?, ?, ?)",
                                 [(self.run_id, *row) for row in rows])

    def _finish(self, header: str, summary: str, seal: str) -> None:
        store = self.store
        with store._guard(), store._lock, store._write():
            store.db.execute("INSERT INTO runs (id, created, header, summary, seal) VALUES (?, ?, ?, ?, ?)",
                             (self.run_id, time.time(), header, summary, seal))
            store.db.execute("DELETE FROM writers WHERE run_id = ?", (self.run_id,))

    def _remove(self) -> None:
        store = self.store
        with store._guard(), store._lock, store._write():
            store._remove_unfinished(self.run_id)
