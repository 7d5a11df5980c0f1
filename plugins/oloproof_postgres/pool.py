"""The postgres store's connections: one of its own for the schema commands and a run's writer
lock, a pool for everything else, psycopg's errors as one line each (without the password), and
the transactions (a write retried when it lost a deadlock; ``batch``: one thread's writes together)."""

from __future__ import annotations

import atexit
import contextlib
import time
from collections.abc import Iterator

from oloproof import OloproofError

from .connection import problem
from .schema import require

RETRIES = 5  # a write that lost a deadlock or a serialization race is retried this often


class Pool:
    """The connections and transactions (a part of ``PostgresStore``: its ``options``, ``dsn``,
    ``secrets``, ``shown``, ``read_only``, ``_pool``, ``_open_lock`` and ``_local``)."""

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
                        require(conn, self.options.schema, self.shown)
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
            raise problem(exc, self.shown, self.secrets) from None

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

    def _damaged(self, what: str) -> OloproofError:
        return OloproofError(f"{what} is damaged (its stored checksum does not match)", where=self.shown,
                             fix="run `oloproof store check` to see everything damaged; export what is intact, or run again")
