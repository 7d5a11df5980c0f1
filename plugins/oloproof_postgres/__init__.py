"""The ``postgres`` store: runs, caches and objects in a PostgreSQL database a team shares.

``store: {type: postgres, dsn: "${OLOPROOF_DSN}"}``. The same contract as the local store
(``oloproof.testing.StoreContract``): a run is streamed in (``begin_run``: chunks of case rows no
reader sees, made visible at once by the run row ``finish`` writes), whole or not at all;
several writers at once (CI jobs on several machines) upsert caches and add runs and objects
without locking each other out; every run carries a seal and every value a checksum. The tables
are versioned and made by ``oloproof store init`` / ``migrate``, never by a run. The dsn's
password is never printed, logged or recorded (``shown`` names the server without it).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from attrs import frozen

from oloproof import (
    ConfigError,
    OloproofError,
    RunWriter,
    check_rows,
    checked_case,
    checksum,
    damaged_run,
    hookimpl,
    seal_intact,
    sealed_records,
    this_process,
    write_run,
)

from . import connection, schema

CHUNK = 1000  # keys per SELECT ... = ANY(...)
RETRIES = 5  # a write that lost a deadlock or a serialization race is retried this often


@frozen(kw_only=True)
class Options:
    dsn: str  # postgresql://user@host:5432/db or key=value pairs; may use ${ENV_VAR}
    schema: str = "oloproof"  # the PostgreSQL schema holding the tables: one per team or project
    pool_size: int = 4  # connections per command at most
    connect_timeout: int = 10  # seconds to reach the server


class PostgresStore:
    """A store in a PostgreSQL schema, reached through a psycopg connection pool.

    ``read_only = True`` (set before the first use) opens read-only transactions only.
    """

    def __init__(self, options: Options, project_dir: Path | None = None):
        if not schema_ok(options.schema):
            raise ConfigError(f"schema {options.schema!r} is not a plain lowercase PostgreSQL name",
                              where="store.schema", fix="use letters, digits and _ (e.g. oloproof_team)")
        if options.pool_size < 1 or options.connect_timeout < 1:
            raise ConfigError("pool_size and connect_timeout must be at least 1", where="store",
                              fix="write pool_size: 4, connect_timeout: 10")
        connection.psycopg()
        self.options, self.schema = options, f'"{options.schema}"'
        self.dsn = connection.expand(options.dsn)
        self.params = connection.parse(self.dsn)
        self.secrets = [self.params.get("password", ""), self.dsn if ":" in self.dsn else ""]
        self.shown = connection.describe(self.params, options.schema)
        self.read_only = False
        self.damaged: dict[str, int] = {}
        self._pool = None
        self._open_lock = threading.Lock()
        self._local = threading.local()  # the open batch's connection of this thread

    # -- connections -------------------------------------------------------------------

    def _connect(self):
        import psycopg

        with self._guard():
            return psycopg.connect(self.dsn, connect_timeout=self.options.connect_timeout,
                                   application_name="oloproof", autocommit=True)

    @property
    def pool(self):
        if self._pool is None:
            with self._open_lock:
                if self._pool is None:
                    with self._connect() as conn, self._guard():
                        schema.require(conn, self.options.schema, self.shown)
                    self._pool = self._make_pool()
        return self._pool

    def _make_pool(self):
        from psycopg_pool import ConnectionPool

        read_only = self.read_only

        def configure(conn) -> None:
            conn.read_only = read_only
            conn.commit()

        with self._guard():
            pool = ConnectionPool(self.dsn, min_size=1, max_size=self.options.pool_size, open=True,
                                  timeout=self.options.connect_timeout + 20, configure=configure,
                                  kwargs={"connect_timeout": self.options.connect_timeout,
                                          "application_name": "oloproof"})
        atexit.register(pool.close)
        return pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            atexit.unregister(self._pool.close)
            self._pool = None

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """psycopg's errors as one line each, without the password."""
        try:
            yield
        except OloproofError:
            raise
        except Exception as exc:
            if type(exc).__module__.split(".")[0] not in ("psycopg", "psycopg_pool"):
                raise
            raise connection.problem(exc, self.shown, self.secrets) from None

    @contextlib.contextmanager
    def _conn(self) -> Iterator:
        """The thread's open batch, or a pooled connection in a transaction of its own."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        with self._guard(), self.pool.connection() as conn:
            yield conn

    def _write(self, work) -> None:
        """Run ``work(conn)`` in a transaction; retried when it lost a deadlock to another writer."""
        from psycopg import errors

        if getattr(self._local, "conn", None) is not None:
            with self._guard():
                work(self._local.conn)
            return
        for attempt in range(RETRIES):
            try:
                with self._conn() as conn:
                    work(conn)
                return
            except OloproofError as exc:
                if not isinstance(exc.__context__, errors.DeadlockDetected | errors.SerializationFailure) \
                        or attempt == RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Everything this thread writes inside is committed together, or not at all."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._guard(), self.pool.connection() as conn:
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    # -- the schema (oloproof store init / migrate) ------------------------------------------

    def init(self) -> str:
        return self._migrate(create=True)

    def migrate(self) -> str:
        return self._migrate(create=False)

    def _migrate(self, create: bool, target: int = schema.VERSION) -> str:
        with self._connect() as conn, self._guard():
            before, after = schema.migrate(conn, self.options.schema, self.shown, create=create, target=target)
        if before == after:
            return f"Store {self.shown}: schema version {after}, up to date"
        if before is None:
            return f"Store {self.shown}: created, schema version {after}"
        return f"Store {self.shown}: migrated from schema version {before} to {after}"

    # -- caches ------------------------------------------------------------------------

    def cache_get_many(self, ns: str, keys: Iterable[str]) -> dict[str, object]:
        """The cached values of ``keys`` in namespace ``ns`` that exist and are intact."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, object] = {}
        for start in range(0, len(keys), CHUNK):
            with self._conn() as conn, self._guard():
                rows = conn.execute(f"SELECT key, value, checksum FROM {self.schema}.cache WHERE ns = %s AND key = ANY(%s)",
                                    (ns, keys[start:start + CHUNK])).fetchall()
            for key, value, stored in rows:
                if stored != checksum(ns, key, value):
                    self.damaged[ns] = self.damaged.get(ns, 0) + 1
                    continue
                found[key] = json.loads(value)
        return found

    def cache_stats(self) -> list[tuple[str, int, int]]:
        """(namespace, entries, bytes of stored values) for every cache namespace, by name."""
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT ns, COUNT(*), COALESCE(SUM(OCTET_LENGTH(value)), 0) FROM {self.schema}.cache "
                                "GROUP BY ns ORDER BY ns").fetchall()
        return [(ns, int(count), int(size)) for ns, count, size in rows]

    def cache_clear(self, ns: str) -> int:
        """Delete every entry of namespace ``ns``; the number deleted. Runs are never touched."""
        deleted = []

        def work(conn) -> None:
            deleted.append(conn.execute(f"DELETE FROM {self.schema}.cache WHERE ns = %s", (ns,)).rowcount)

        self._write(work)
        return deleted[0]

    def cache_put_many(self, ns: str, items: Iterable[tuple[str, object]]) -> None:
        values = {}
        for k, v in items:  # the last value of a key wins, as in one writer's order
            values[k] = json.dumps(v, ensure_ascii=False, sort_keys=True)
        # in key order: two writers upserting the same keys take their row locks in one order
        rows = [(ns, k, value, checksum(ns, k, value)) for k, value in sorted(values.items())]
        if not rows:
            return

        def work(conn) -> None:
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {self.schema}.cache (ns, key, value, checksum) VALUES (%s, %s, %s, %s) "
                                "ON CONFLICT (ns, key) DO UPDATE SET value = EXCLUDED.value, checksum = EXCLUDED.checksum",
                                rows)

        self._write(work)

    # -- runs --------------------------------------------------------------------------

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
                for other, in conn.execute(f"SELECT run_id FROM {self.schema}.writers ORDER BY run_id").fetchall():
                    if conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (self._lock_key(other),)).fetchone()[0]:
                        self._remove_unfinished(conn, other)
                conn.execute(f"INSERT INTO {self.schema}.writers (run_id, started, host, pid) VALUES (%s, %s, %s, %s)",
                             (run_id, time.time(), host, pid))

            self._write(work)
        except BaseException:
            lock.close()
            raise
        return PostgresWriter(self, run_id, lock)

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
            with self._conn() as conn, self._guard():
                row = conn.execute(f"SELECT id FROM {self.schema}.runs WHERE parent IS NULL ORDER BY id DESC LIMIT 1").fetchone()
            if row is None:
                raise ConfigError(f"no run in {self.shown} yet", fix="start one with `oloproof run`")
            self.get_run(row[0])
            return row[0]
        if not prefix.startswith("run_"):
            prefix = "run_" + prefix
        with self._conn() as conn, self._guard():
            ids = [r[0] for r in conn.execute(f"SELECT id FROM {self.schema}.runs WHERE id >= %s AND id < %s ORDER BY id LIMIT 2",
                                              (prefix, prefix + "\uffff"))]
        if not ids:
            raise ConfigError(f"no run {prefix} in {self.shown}", fix="list the runs with `oloproof runs`")
        if len(ids) > 1:
            raise ConfigError(f"{prefix} is ambiguous: it starts more than one run", fix="give more characters of the run id")
        return ids[0]

    def _seal(self, run_id: str, header: str, summary: str, seal: str) -> dict:
        data = seal_intact(header, summary, seal)
        if data is None:
            raise self._damaged(f"run {run_id}")
        return data

    def _damaged(self, what: str) -> OloproofError:
        return OloproofError(f"{what} is damaged (its stored checksum does not match)", where=self.shown,
                             fix="run `oloproof store check` to see everything damaged; export what is intact, or run again")

    def get_run(self, run_id: str) -> tuple[dict, dict]:
        with self._conn() as conn, self._guard():
            row = conn.execute(f"SELECT header, summary, seal FROM {self.schema}.runs WHERE id = %s", (run_id,)).fetchone()
        if row is None:
            raise ConfigError(f"no run {run_id}", fix="list the runs with `oloproof runs`")
        self._seal(run_id, *row)
        return json.loads(row[0]), json.loads(row[1])

    def _head(self, run_id: str) -> dict:
        """The finished run's seal, or ConfigError for no such run."""
        with self._conn() as conn, self._guard():
            head = conn.execute(f"SELECT header, summary, seal FROM {self.schema}.runs WHERE id = %s", (run_id,)).fetchone()
        if head is None:
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

        return sealed_records(page, seal, lambda problem: damaged_run(run_id, problem, self.shown))

    def run_case(self, run_id: str, case_id: str) -> dict | None:
        """One case record of a finished run by its case id (None when the run has no such case),
        checked against its row's checksum (storage.checked_case)."""
        self._head(run_id)
        with self._conn() as conn, self._guard():
            row = conn.execute(f"SELECT idx, record, checksum FROM {self.schema}.run_cases WHERE run_id = %s "
                               "AND case_id = %s ORDER BY idx LIMIT 1", (run_id, case_id)).fetchone()
        return checked_case(run_id, case_id, row, lambda: self.run_cases(run_id), self.shown)

    def list_runs(self) -> list[dict]:
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT id, header, summary, seal FROM {self.schema}.runs ORDER BY id").fetchall()
        for run_id, header, summary, seal in rows:
            self._seal(run_id, header, summary, seal)
        return [json.loads(r[1]) for r in rows]

    # -- content-addressed objects (comparisons, diagnoses, validations) -------------------

    def put_object(self, kind: str, object_id: str, record: dict) -> None:
        text = json.dumps(record, sort_keys=True)
        self._write(lambda conn: conn.execute(
            f"INSERT INTO {self.schema}.objects (id, kind, created, record, checksum) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING", (object_id, kind, time.time(), text, checksum(object_id, kind, text))))

    def _object(self, object_id: str, kind: str, record: str, stored: str) -> dict:
        if stored != checksum(object_id, kind, record):
            raise self._damaged(f"{kind} {object_id}")
        return json.loads(record)

    def get_object(self, prefix: str) -> tuple[str, str, dict]:
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT id, kind, record, checksum FROM {self.schema}.objects WHERE id >= %s AND id < %s "
                                "ORDER BY id LIMIT 2", (prefix, prefix + "\uffff")).fetchall()
        if len(rows) != 1:
            problem = f"no object {prefix}" if not rows else f"{prefix} is ambiguous"
            raise ConfigError(problem, fix="copy the whole sha256:... id the command printed")
        object_id, kind, record, stored = rows[0]
        return object_id, kind, self._object(object_id, kind, record, stored)

    def list_objects(self, kind: str) -> list[tuple[str, dict]]:
        """Every stored object of ``kind``, oldest first."""
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT id, record, checksum FROM {self.schema}.objects WHERE kind = %s ORDER BY seq",
                                (kind,)).fetchall()
        return [(object_id, self._object(object_id, kind, record, stored)) for object_id, record, stored in rows]

    def all_objects(self) -> list[tuple[str, str, dict]]:
        """Every stored object as ``(id, kind, record)``, oldest first (``oloproof store copy``)."""
        with self._conn() as conn, self._guard():
            rows = conn.execute(f"SELECT id, kind, record, checksum FROM {self.schema}.objects ORDER BY seq").fetchall()
        return [(object_id, kind, self._object(object_id, kind, record, stored)) for object_id, kind, record, stored in rows]

    # -- the whole store -----------------------------------------------------------------

    def check(self) -> dict:
        """Verify everything stored, in one snapshot, streamed: the counts, one line a problem, and
        the runs begun and not finished (not damage: ``writing`` when their writer's process still
        holds its lock, else removed by the next run begun in the store)."""
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
                                          rows("objects", f"SELECT id, kind, record, checksum FROM {s}.objects"))
        problems += [f"run {run_id}: case records without their run" for run_id in orphans]
        counts["unfinished"] = len(unfinished)
        return {"store": self.shown, "counts": counts, "problems": problems, "unfinished": unfinished}

    def _writer_gone(self, conn, run_id: str) -> bool:
        """Whether no process holds the run's writer lock (taken and released in this transaction)."""
        return conn.execute("SELECT pg_try_advisory_xact_lock_shared(%s)", (self._lock_key(run_id),)).fetchone()[0]


class PostgresWriter(RunWriter):
    """A run being written to the postgres store (``PostgresStore.begin_run``): each ``add`` one
    transaction of its own (COPY), or a part of the open batch; ``lock`` is the connection that
    holds the run's writer lock until the run is finished or aborted."""

    def __init__(self, store: PostgresStore, run_id: str, lock):
        super().__init__(run_id)
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


def schema_ok(name: str) -> bool:
    return bool(connection.SCHEMA_NAME.match(name))


@hookimpl
def oloproof_register_stores(registry):
    registry.add("postgres", PostgresStore, options=Options, url_schemes=("postgresql", "postgres"), shorthand="dsn")
