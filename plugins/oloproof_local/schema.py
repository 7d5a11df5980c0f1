"""The local store's tables, and opening its SQLite database: for writing (WAL mode; the tables
made, and the integrity columns added to a store made before them, in one write transaction), or
read-only as it is on disk, for the reading commands."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, created REAL, header TEXT, summary TEXT);
CREATE TABLE IF NOT EXISTS run_cases (run_id TEXT, idx INTEGER, case_id TEXT, record TEXT,
                                      PRIMARY KEY (run_id, idx));
CREATE TABLE IF NOT EXISTS cache (ns TEXT, key TEXT, value TEXT, PRIMARY KEY (ns, key));
CREATE TABLE IF NOT EXISTS objects (id TEXT PRIMARY KEY, kind TEXT, created REAL, record TEXT);
CREATE TABLE IF NOT EXISTS writers (run_id TEXT PRIMARY KEY, started REAL, host TEXT, pid INTEGER);
CREATE INDEX IF NOT EXISTS run_cases_case ON run_cases (run_id, case_id);
"""
# integrity columns, added to a store made before they existed (their rows stay unverified)
COLUMNS = {"runs": "seal", "run_cases": "checksum", "cache": "checksum", "objects": "checksum"}
CACHE_KIB = 16 * 1024  # the writing connection's page cache (PRAGMA cache_size)
CHECKPOINT_PAGES = 10_000  # WAL pages between automatic checkpoints (PRAGMA wal_autocheckpoint)


def text(value: bytes) -> str:
    """A TEXT value as read: UTF-8, and a byte that breaks it kept as a surrogate escape, so a
    damaged row is read (and fails its checksum) instead of stopping the command that reads it."""
    return value.decode("utf-8", "surrogateescape")


def connect(target: str | Path, **kw) -> sqlite3.Connection:
    """A connection of the store: shared between threads, autocommit, ``text`` for TEXT values."""
    db = sqlite3.connect(target, check_same_thread=False, isolation_level=None, **kw)
    db.text_factory = text
    return db


class Tables:
    """Opening the database (a part of ``LocalStore``: its ``root`` and ``path``; read-only, it
    sets the integrity column names ``seal``, ``case_sum``, ``cache_sum``, ``object_sum`` and
    ``writers`` to what the store holds)."""

    def _open(self) -> sqlite3.Connection:
        self.root.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        if created:  # created like any file the user makes: 0666 less the umask
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o666))
        db = connect(self.path, timeout=60)
        try:
            return self._prepare(db)
        except BaseException:
            db.close()
            if created:  # a new store whose tables could not be made (a full disk): leave no store behind
                self._remove_if_empty()
            raise

    def _remove_if_empty(self) -> None:
        """Remove the database file (and its WAL and shared-memory files) when it holds no table:
        a store this command began to create and could not, which would otherwise read as damage."""
        try:
            with contextlib.closing(connect(self.path, timeout=1)) as db:
                if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    return  # another command made the tables meanwhile: its store, kept
        except sqlite3.Error:
            return
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")

    def _prepare(self, db: sqlite3.Connection) -> sqlite3.Connection:
        for attempt in range(600):
            try:
                db.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                # a new store that another command is creating at this moment: SQLite answers
                # "locked" at once here, without the busy timeout, so wait for it
                if "locked" not in str(exc) or attempt == 599:
                    raise
                time.sleep(0.1)
        db.execute("PRAGMA synchronous=NORMAL")  # with WAL: a commit survives a crash of the process
        # a page cache of 16 MiB rather than 2: a large run's cache index, keyed by digests (inserts
        # land anywhere in it), stays in memory between commits instead of being read back each time
        db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        # and the WAL copied back into the database every 10,000 pages rather than 1,000: a page
        # rewritten by many commits of a large run is copied once, not at every checkpoint
        db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
        # in one write transaction: two commands opening a new store at once would otherwise both
        # find a column missing and both add it
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            for table, column in COLUMNS.items():
                if column not in {row[1] for row in db.execute(f"PRAGMA table_info({table})")}:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return db

    def _open_read_only(self) -> sqlite3.Connection:
        if not self.path.exists():
            return self._open_read_only_empty()
        uri = self.path.resolve().as_uri()
        try:
            db = connect(f"{uri}?mode=ro", uri=True, timeout=60)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # a WAL database in a folder we may not write (SQLite cannot make its -shm file)
            db = self._open_unwritable(uri)
        present = {table: {row[1] for row in db.execute(f"PRAGMA table_info({table})")} for table in COLUMNS}
        if not all(present.values()):  # a database without our tables: nothing we know is stored in it
            self.missing = [table for table, columns in present.items() if not columns]
            db.close()
            return self._open_read_only_empty()
        # a store made before the integrity columns (and not written since) reads as unverified
        self.seal, self.case_sum, self.cache_sum, self.object_sum = (
            column if column in present[table] else "NULL" for table, column in COLUMNS.items())
        self.writers = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'writers'").fetchone() is not None
        return db

    def _open_unwritable(self, uri: str) -> sqlite3.Connection:
        """A store in a folder this process may not write, without its ``-shm`` file. Its main file
        alone may be stale: commits still in the ``-wal`` file are not in it, and SQLite's
        ``immutable`` mode would silently ignore them. So with a ``-wal`` file that holds anything,
        the database and its WAL are copied to a private folder and read there, WAL included (the
        copy is removed at exit); without one, the main file is the whole store."""
        wal = Path(f"{self.path}-wal")
        try:
            pending = wal.stat().st_size > 0
        except FileNotFoundError:
            pending = False
        if not pending:
            return connect(f"{uri}?immutable=1", uri=True)
        folder = tempfile.mkdtemp(prefix="oloproof-store-")
        atexit.register(shutil.rmtree, folder, True)
        self._copy = folder
        try:
            copy = Path(folder) / "store.db"
            shutil.copyfile(self.path, copy)
            shutil.copyfile(wal, f"{copy}-wal")
            db = connect(copy, timeout=60)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()  # reads the WAL into the copy's -shm
            db.execute("PRAGMA query_only=1")
        except (OSError, sqlite3.Error) as exc:
            from oloproof import OloproofError

            raise OloproofError(f"the store's folder cannot be written, its -shm file is missing, and its -wal file "
                                f"(commits not yet in {self.path.name}) could not be read through a copy: {exc}",
                                where=self.shown, fix=f"make {self.root.name}/ writable (or restore its -shm file) and "
                                                      "run again") from None
        return db

    @staticmethod
    def _open_read_only_empty() -> sqlite3.Connection:
        """Nothing stored yet: an empty store in memory, so reading commands find no runs."""
        db = connect(":memory:")
        db.executescript(SCHEMA)
        for table, column in COLUMNS.items():
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
        return db
