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

import threading
from pathlib import Path

from attrs import frozen

from oloproof import ConfigError, hookimpl, store_key

from . import connection, schema
from .cache import CHUNK, Caches
from .integrity import Check
from .objects import Objects
from .pool import RETRIES, Pool
from .query import Query
from .runs import PostgresWriter, Runs
from .signing import Signing

__all__ = ["CHUNK", "RETRIES", "Options", "PostgresStore", "PostgresWriter", "oloproof_register_stores", "schema_ok"]


@frozen(kw_only=True)
class Options:
    dsn: str  # postgresql://user@host:5432/db or key=value pairs; may use ${ENV_VAR}
    schema: str = "oloproof"  # the PostgreSQL schema holding the tables: one per team or project
    pool_size: int = 4  # connections per command at most
    connect_timeout: int = 10  # seconds to reach the server


class PostgresStore(Pool, Caches, Runs, Query, Objects, Check, Signing):
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
        self.damaged_runs: list[str] = []  # runs list_runs left out (damaged, or an id oloproof never makes)
        self.key = store_key(project_dir)  # the store key: keyed checksums (docs/stores.md)
        self._pool = None
        self._open_lock = threading.Lock()
        self._local = threading.local()  # the open batch's connection of this thread

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


def schema_ok(name: str) -> bool:
    return bool(connection.SCHEMA_NAME.match(name))


@hookimpl
def oloproof_register_stores(registry):
    registry.add("postgres", PostgresStore, options=Options, url_schemes=("postgresql", "postgres"), shorthand="dsn")
