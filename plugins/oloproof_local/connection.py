"""The local store's connections: the one connection (opened on first use), the readers'
second connection, SQLite's errors as one line each, and the write transactions (``batch``)."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator

from oloproof import OloproofError

CHECK = "run `oloproof store check`"


class Connections:
    """The connections and transactions (a part of ``LocalStore``: its ``_db``, ``_reader``,
    ``_lock``, ``_read_lock``, ``_batch`` and ``_owner``; ``db`` opens through ``Tables``)."""

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            with self._guard():
                self._db = self._open_read_only() if self.read_only else self._open()
        return self._db

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._db is not None:
            self._db.close()
            self._db = None

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """The connection a cache read uses. A thread with no write transaction of its own reads
        through a second connection, which in WAL mode sees the last commit without waiting for
        another thread's write (a run's cache writers commit while its cases are looked up); the
        thread writing (or a read-only store) reads through the one connection."""
        db = self.db
        if self.read_only or self._owner == threading.get_ident():
            with self._guard(), self._lock:
                yield db
            return
        with self._guard(), self._read_lock:
            if self._reader is None:
                from .schema import connect

                self._reader = connect(self.path, timeout=60)
            yield self._reader

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """SQLite's errors as one line each: what happened to which file, and the fix."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self._problem(exc) from None

    def _problem(self, exc: sqlite3.Error) -> OloproofError:
        text = str(exc)
        if "full" in text or "disk I/O" in text:
            fix = "free some disk space (or raise the file size limit, ulimit -f) and run again"
        elif "not a database" in text or "malformed" in text:
            fix = f"{CHECK}; move the damaged {self.shown} aside to start a new store"
        elif "readonly" in text or "unable to open" in text or "read-only" in text:
            fix = f"make {self.root.name}/ writable (the reading commands runs and inspect work without)"
        elif "locked" in text:
            fix = "another oloproof command is writing the store; wait for it and run again"
        else:
            fix = CHECK
        return OloproofError(f"the store could not be used: {text}", where=self.shown, fix=fix)

    def _damaged(self, what: str) -> OloproofError:
        return OloproofError(f"{what} is damaged (its stored checksum does not match)", where=self.shown,
                             fix=f"{CHECK} to see everything damaged; export what is intact, or run again")

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Everything written inside is committed together, or not at all (a diagnosis and its
        child runs, say)."""
        with self._guard(), self._lock:
            outer = self._batch == 0
            if outer:
                self.db.execute("BEGIN IMMEDIATE")
                self._owner = threading.get_ident()
            self._batch += 1
            try:
                yield
            except BaseException:
                self._batch -= 1
                if outer:
                    self._owner = None
                    self.db.execute("ROLLBACK")
                raise
            self._batch -= 1
            if outer:
                self._owner = None
                self.db.execute("COMMIT")

    def _write(self):
        """A transaction of its own, or a part of the open batch."""
        return contextlib.nullcontext() if self._batch else self.batch()
