"""The local store's tables, and opening its SQLite database: for writing (WAL mode; the tables
made, and the integrity columns added to a store made before them, in one write transaction), or
read-only as it is on disk, for the reading commands."""

from __future__ import annotations

import os
import sqlite3
import time

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


class Tables:
    """Opening the database (a part of ``LocalStore``: its ``root`` and ``path``; read-only, it
    sets the integrity column names ``seal``, ``case_sum``, ``cache_sum``, ``object_sum`` and
    ``writers`` to what the store holds)."""

    def _open(self) -> sqlite3.Connection:
        self.root.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():  # created like any file the user makes: 0666 less the umask
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o666))
        db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
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
            db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=60, check_same_thread=False,
                                 isolation_level=None)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            # a WAL database in a folder we may not write: read it as it is on disk
            db = sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False, isolation_level=None)
        present = {table: {row[1] for row in db.execute(f"PRAGMA table_info({table})")} for table in COLUMNS}
        if not all(present.values()):  # a database without our tables: nothing we know is stored in it
            db.close()
            return self._open_read_only_empty()
        # a store made before the integrity columns (and not written since) reads as unverified
        self.seal, self.case_sum, self.cache_sum, self.object_sum = (
            column if column in present[table] else "NULL" for table, column in COLUMNS.items())
        self.writers = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'writers'").fetchone() is not None
        return db

    @staticmethod
    def _open_read_only_empty() -> sqlite3.Connection:
        """Nothing stored yet: an empty store in memory, so reading commands find no runs."""
        db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        db.executescript(SCHEMA)
        for table, column in COLUMNS.items():
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
        return db
