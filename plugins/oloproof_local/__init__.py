"""The embedded default store: one SQLite database in ``.oloproof/`` of the project.

Runs are written in one transaction and never updated (immutable); the caches and the
content-addressed objects (comparisons, diagnoses) live beside them. WAL mode and a busy timeout
let two runs in one project write without corrupting each other.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from attrs import frozen

from oloproof import ConfigError, hookimpl

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, created REAL, header TEXT, summary TEXT);
CREATE TABLE IF NOT EXISTS run_cases (run_id TEXT, idx INTEGER, case_id TEXT, record TEXT,
                                      PRIMARY KEY (run_id, idx));
CREATE TABLE IF NOT EXISTS cache (ns TEXT, key TEXT, value TEXT, PRIMARY KEY (ns, key));
CREATE TABLE IF NOT EXISTS objects (id TEXT PRIMARY KEY, kind TEXT, created REAL, record TEXT);
"""
CHUNK = 500  # keys per SELECT ... IN (...), under SQLite's variable limit


@frozen(kw_only=True)
class Options:
    path: str = ".oloproof"


class LocalStore:
    """Runs, caches and objects in ``<project>/.oloproof/store.db``."""

    def __init__(self, options: Options | None, project_dir: Path):
        self.root = Path(project_dir) / (options.path if options else ".oloproof")
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self.root.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.root / "store.db", timeout=60, check_same_thread=False,
                                 isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(SCHEMA)
            self._db = db
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    # -- caches ------------------------------------------------------------------------

    def cache_get_many(self, ns: str, keys: Iterable[str]) -> dict[str, object]:
        """The cached values of ``keys`` in namespace ``ns`` that exist."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, object] = {}
        for start in range(0, len(keys), CHUNK):
            part = keys[start:start + CHUNK]
            marks = ",".join("?" * len(part))
            with self._lock:
                rows = self.db.execute(f"SELECT key, value FROM cache WHERE ns = ? AND key IN ({marks})",
                                       [ns, *part]).fetchall()
            found.update((k, json.loads(v)) for k, v in rows)
        return found

    def cache_put_many(self, ns: str, items: Iterable[tuple[str, object]]) -> None:
        rows = [(ns, k, json.dumps(v, ensure_ascii=False, sort_keys=True)) for k, v in items]
        if rows:
            with self._lock, self._transaction():
                self.db.executemany("INSERT OR REPLACE INTO cache (ns, key, value) VALUES (?, ?, ?)", rows)

    def cache_stats(self) -> list[tuple[str, int, int]]:
        """(namespace, entries, bytes of stored values) for every cache namespace, by name."""
        with self._lock:
            rows = self.db.execute("SELECT ns, COUNT(*), COALESCE(SUM(LENGTH(CAST(value AS BLOB))), 0) FROM cache "
                                   "GROUP BY ns ORDER BY ns").fetchall()
        return [(ns, count, size) for ns, count, size in rows]

    def cache_clear(self, ns: str) -> int:
        """Delete every entry of namespace ``ns``; the number deleted. Runs are never touched."""
        with self._lock, self._transaction():
            return self.db.execute("DELETE FROM cache WHERE ns = ?", (ns,)).rowcount

    # -- runs --------------------------------------------------------------------------

    def save_run(self, header: dict, cases: Iterable[dict], summary: dict) -> None:
        """Write a whole run at once: either all of it is stored or none of it."""
        # key order kept: judgments stay in the suite's evaluator order
        rows = [(header["id"], i, c["id"], json.dumps(c, ensure_ascii=False))
                for i, c in enumerate(cases)]
        with self._lock, self._transaction():
            self.db.execute("INSERT INTO runs (id, created, header, summary) VALUES (?, ?, ?, ?)",
                            (header["id"], time.time(), json.dumps(header), json.dumps(summary)))
            self.db.executemany("INSERT INTO run_cases (run_id, idx, case_id, record) VALUES (?, ?, ?, ?)", rows)

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
        with self._lock:
            ids = [r[0] for r in self.db.execute("SELECT id FROM runs WHERE id >= ? AND id < ? LIMIT 2",
                                                 (prefix, prefix + "\uffff"))]
        if not ids:
            raise ConfigError(f"no run {prefix} in {self.root.name}/", fix="list the runs with `oloproof runs`")
        if len(ids) > 1:
            raise ConfigError(f"{prefix} is ambiguous: it starts more than one run",
                              fix="give more characters of the run id")
        return ids[0]

    def get_run(self, run_id: str) -> tuple[dict, dict]:
        with self._lock:
            row = self.db.execute("SELECT header, summary FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise ConfigError(f"no run {run_id}", fix="list the runs with `oloproof runs`")
        return json.loads(row[0]), json.loads(row[1])

    def run_cases(self, run_id: str) -> Iterator[dict]:
        with self._lock:
            rows = self.db.execute("SELECT record FROM run_cases WHERE run_id = ? ORDER BY idx", (run_id,)).fetchall()
        for (record,) in rows:
            yield json.loads(record)

    def list_runs(self) -> list[dict]:
        with self._lock:
            rows = self.db.execute("SELECT header FROM runs ORDER BY id").fetchall()
        return [json.loads(r[0]) for r in rows]

    # -- content-addressed objects (comparisons, diagnoses) ------------------------------

    def put_object(self, kind: str, object_id: str, record: dict) -> None:
        with self._lock, self._transaction():
            self.db.execute("INSERT OR IGNORE INTO objects (id, kind, created, record) VALUES (?, ?, ?, ?)",
                            (object_id, kind, time.time(), json.dumps(record, sort_keys=True)))

    def get_object(self, prefix: str) -> tuple[str, str, dict]:
        with self._lock:
            rows = self.db.execute("SELECT id, kind, record FROM objects WHERE id >= ? AND id < ? LIMIT 2",
                                   (prefix, prefix + "\uffff")).fetchall()
        if len(rows) != 1:
            problem = f"no object {prefix}" if not rows else f"{prefix} is ambiguous"
            raise ConfigError(problem, fix="copy the whole sha256:... id the command printed")
        object_id, kind, record = rows[0]
        return object_id, kind, json.loads(record)

    def list_objects(self, kind: str) -> list[tuple[str, dict]]:
        """Every stored object of ``kind``, oldest first."""
        with self._lock:
            rows = self.db.execute("SELECT id, record FROM objects WHERE kind = ? ORDER BY created, rowid",
                                   (kind,)).fetchall()
        return [(object_id, json.loads(record)) for object_id, record in rows]

    def _transaction(self):
        return _Transaction(self.db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, exc, tb) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


@hookimpl
def oloproof_register_stores(registry):
    registry.add("local", LocalStore, options=Options)
