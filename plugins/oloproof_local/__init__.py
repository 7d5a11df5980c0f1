"""The embedded default store: one SQLite database in ``.oloproof/`` of the project.

A run is streamed in: ``begin_run`` registers its writer, each ``add`` commits a chunk of case
rows that no reader sees, and ``finish`` writes the run row (with its seal) that makes them
visible at once; a finished run is never updated (immutable). The caches and the
content-addressed objects (comparisons, diagnoses) live beside them. WAL mode and a busy timeout
let two runs in one project write without corrupting each other. Every run carries a seal (the
count and digest of its case records, and a digest of its header and summary) that every read
checks; every cache value and object carries a checksum. A damaged value is an error naming
``oloproof store check`` (a cache value: a miss, counted in ``damaged``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from attrs import frozen

from oloproof import (
    ConfigError,
    OloproofError,
    RunWriter,
    checked_case,
    damaged_run,
    hookimpl,
    process_gone,
    sealed_records,
    this_process,
    write_run,
)

from .integrity import check_store, checksum
from .keys import stored_key

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
CHUNK = 500  # keys per SELECT ... IN (...), under SQLite's variable limit
CACHE_KIB = 16 * 1024  # the writing connection's page cache (PRAGMA cache_size)
CHECKPOINT_PAGES = 10_000  # WAL pages between automatic checkpoints (PRAGMA wal_autocheckpoint)
_VALUE = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode  # a cache value's text (built once)
CHECK = "run `oloproof store check`"


@frozen(kw_only=True)
class Options:
    path: str = ".oloproof"


class LocalStore:
    """Runs, caches and objects in ``<project>/.oloproof/store.db``.

    ``read_only = True`` (set before the first use) opens the database read-only: the reading
    commands work in a store they may not write.
    """

    def __init__(self, options: Options | None, project_dir: Path):
        self.root = Path(project_dir) / (options.path if options else ".oloproof")
        self.path = self.root / "store.db"
        self.read_only = False
        self.damaged: dict[str, int] = {}  # cache namespace -> values that failed their checksum
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._batch = 0
        self._owner: int | None = None  # the thread whose write transaction is open
        self._reader: sqlite3.Connection | None = None  # reads by other threads (see _read)
        self._read_lock = threading.Lock()
        # integrity columns, or NULL where a store opened read-only was made before them
        self.seal, self.case_sum, self.cache_sum, self.object_sum = "seal", "checksum", "checksum", "checksum"
        self.writers = True  # the writers table is there (a store made before it, opened read-only: not)

    @property
    def shown(self) -> str:
        return f"{self.root.name}/store.db"

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            with self._guard():
                self._db = self._open_read_only() if self.read_only else self._open()
        return self._db

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
                self._reader = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
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

    # -- caches ------------------------------------------------------------------------

    def cache_get_many(self, ns: str, keys: Iterable[str]) -> dict[str, object]:
        """The cached values of ``keys`` in namespace ``ns`` that exist and are intact."""
        asked = {stored_key(key): key for key in keys}
        keys = list(asked)
        found: dict[str, object] = {}
        for start in range(0, len(keys), CHUNK):
            part = keys[start:start + CHUNK]
            marks = ",".join("?" * len(part))
            with self._read() as db:
                rows = db.execute(f"SELECT key, value, {self.cache_sum} FROM cache WHERE ns = ? AND key IN ({marks})",
                                  [ns, *part]).fetchall()
            for key, value, stored in rows:
                key = asked[key]
                if stored is None:  # written before checksums: recomputed, as when in doubt
                    continue
                if stored != checksum(ns, key, value):
                    self.damaged[ns] = self.damaged.get(ns, 0) + 1
                    continue
                found[key] = json.loads(value)
        return found

    def cache_put_many(self, ns: str, items: Iterable[tuple[str, object]]) -> None:
        rows = []
        for k, v in items:
            value = _VALUE(v)
            rows.append((ns, stored_key(k), value, checksum(ns, k, value)))
        if rows:
            with self._guard(), self._lock, self._write():
                self.db.executemany("INSERT OR REPLACE INTO cache (ns, key, value, checksum) VALUES (?, ?, ?, ?)",
                                    rows)

    def cache_stats(self) -> list[tuple[str, int, int]]:
        """(namespace, entries, bytes of stored values) for every cache namespace, by name."""
        with self._guard(), self._lock:
            rows = self.db.execute("SELECT ns, COUNT(*), COALESCE(SUM(LENGTH(CAST(value AS BLOB))), 0) FROM cache "
                                   "GROUP BY ns ORDER BY ns").fetchall()
        return [(ns, count, size) for ns, count, size in rows]

    def cache_clear(self, ns: str) -> int:
        """Delete every entry of namespace ``ns``; the number deleted. Runs are never touched."""
        with self._guard(), self._lock, self._write():
            return self.db.execute("DELETE FROM cache WHERE ns = ?", (ns,)).rowcount

    # -- runs --------------------------------------------------------------------------

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
            self.db.execute("INSERT INTO writers (run_id, started, host, pid) VALUES (?, ?, ?, ?)",
                            (run_id, time.time(), host, pid))
        return LocalWriter(self, run_id)

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
            for header in reversed(self.list_runs()):
                if not header.get("parent"):
                    return header["id"]
            raise ConfigError(f"no run in {self.root.name}/ yet", fix="start one with `oloproof run`")
        if not prefix.startswith("run_"):
            prefix = "run_" + prefix
        with self._guard(), self._lock:
            ids = [r[0] for r in self.db.execute("SELECT id FROM runs WHERE id >= ? AND id < ? LIMIT 2",
                                                 (prefix, prefix + "\uffff"))]
        if not ids:
            raise ConfigError(f"no run {prefix} in {self.root.name}/", fix="list the runs with `oloproof runs`")
        if len(ids) > 1:
            raise ConfigError(f"{prefix} is ambiguous: it starts more than one run",
                              fix="give more characters of the run id")
        return ids[0]

    def _seal(self, run_id: str, header: str, summary: str, seal: str | None) -> dict | None:
        """The run's seal, after checking its header and summary against it."""
        if seal is None:
            return None  # stored before seals existed
        try:
            data = json.loads(seal)
            intact = data["meta"] == checksum(header, summary)
        except (ValueError, KeyError, TypeError):
            intact = False
        if not intact:
            raise self._damaged(f"run {run_id}")
        return data

    def _head(self, run_id: str) -> tuple[str, str, dict | None]:
        """A finished run's header and summary (as stored) and its seal (None: stored before
        seals), checked; ConfigError for no such run (or one not finished)."""
        with self._guard(), self._lock:
            head = self.db.execute(f"SELECT header, summary, {self.seal} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if head is None:
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

        return sealed_records(page, seal, lambda problem: damaged_run(run_id, problem, self.shown))

    def run_case(self, run_id: str, case_id: str) -> dict | None:
        """One case record of a finished run by its case id (None when the run has no such case),
        checked against its row's checksum (storage.checked_case)."""
        self._head(run_id)
        with self._guard(), self._lock:
            row = self.db.execute(f"SELECT idx, record, {self.case_sum} FROM run_cases WHERE run_id = ? AND case_id = ? "
                                  "ORDER BY idx LIMIT 1", (run_id, case_id)).fetchone()
        return checked_case(run_id, case_id, row, lambda: self.run_cases(run_id), self.shown)

    def list_runs(self) -> list[dict]:
        with self._guard(), self._lock:
            rows = self.db.execute(f"SELECT id, header, summary, {self.seal} FROM runs ORDER BY id").fetchall()
        for run_id, header, summary, seal in rows:
            self._seal(run_id, header, summary, seal)
        return [json.loads(r[1]) for r in rows]

    # -- content-addressed objects (comparisons, diagnoses) ------------------------------

    def put_object(self, kind: str, object_id: str, record: dict) -> None:
        text = json.dumps(record, sort_keys=True)
        with self._guard(), self._lock, self._write():
            self.db.execute("INSERT OR IGNORE INTO objects (id, kind, created, record, checksum) VALUES (?, ?, ?, ?, ?)",
                            (object_id, kind, time.time(), text, checksum(object_id, kind, text)))

    def _object(self, object_id: str, kind: str, record: str, stored: str | None) -> dict:
        if stored is not None and stored != checksum(object_id, kind, record):
            raise self._damaged(f"{kind} {object_id}")
        return json.loads(record)

    def get_object(self, prefix: str) -> tuple[str, str, dict]:
        with self._guard(), self._lock:
            rows = self.db.execute(f"SELECT id, kind, record, {self.object_sum} FROM objects WHERE id >= ? AND id < ? LIMIT 2",
                                   (prefix, prefix + "\uffff")).fetchall()
        if len(rows) != 1:
            problem = f"no object {prefix}" if not rows else f"{prefix} is ambiguous"
            raise ConfigError(problem, fix="copy the whole sha256:... id the command printed")
        object_id, kind, record, stored = rows[0]
        return object_id, kind, self._object(object_id, kind, record, stored)

    def list_objects(self, kind: str) -> list[tuple[str, dict]]:
        """Every stored object of ``kind``, oldest first."""
        with self._guard(), self._lock:
            rows = self.db.execute(f"SELECT id, record, {self.object_sum} FROM objects WHERE kind = ? ORDER BY created, rowid",
                                   (kind,)).fetchall()
        return [(object_id, self._object(object_id, kind, record, stored)) for object_id, record, stored in rows]

    def all_objects(self) -> list[tuple[str, str, dict]]:
        """Every stored object as ``(id, kind, record)``, oldest first (``oloproof store copy``)."""
        with self._guard(), self._lock:
            rows = self.db.execute(f"SELECT id, kind, record, {self.object_sum} FROM objects ORDER BY created, rowid").fetchall()
        return [(object_id, kind, self._object(object_id, kind, record, stored)) for object_id, kind, record, stored in rows]

    # -- the whole store -----------------------------------------------------------------

    def check(self) -> dict:
        """Verify everything stored (integrity.check_store): the counts, and one line a problem."""
        return check_store(self)


class LocalWriter(RunWriter):
    """A run being written to the local store (``LocalStore.begin_run``): each ``add`` one
    transaction of its own (or a part of the open batch)."""

    def __init__(self, store: LocalStore, run_id: str):
        super().__init__(run_id)
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


@hookimpl
def oloproof_register_stores(registry):
    registry.add("local", LocalStore, options=Options)
