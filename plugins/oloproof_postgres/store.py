"""The ``postgres`` store's class: the pool, caches, runs, queries, objects, checks and signing
put together (imported when a postgres store is opened, not when the plugin is registered)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from oloproof import ConfigError, store_key

from .connection import describe, expand, parse, psycopg, schema_ok
from .schema import VERSION, migrate
from .cache import Caches
from .integrity import Check
from .objects import Objects
from .pool import Pool
from .query import Query
from .runs import Runs
from .signing import Signing


class PostgresStore(Pool, Caches, Runs, Query, Objects, Check, Signing):
    """A store in a PostgreSQL schema, reached through a psycopg connection pool.

    ``read_only = True`` (set before the first use) opens read-only transactions only.
    """

    def __init__(self, options: Any, project_dir: Path | None = None):
        if not schema_ok(options.schema):
            raise ConfigError(f"schema {options.schema!r} is not a plain lowercase PostgreSQL name",
                              where="store.schema", fix="use letters, digits and _ (e.g. oloproof_team)")
        if options.pool_size < 1 or options.connect_timeout < 1:
            raise ConfigError("pool_size and connect_timeout must be at least 1", where="store",
                              fix="write pool_size: 4, connect_timeout: 10")
        psycopg()
        self.options, self.schema = options, f'"{options.schema}"'
        self.dsn = expand(options.dsn)
        self.params = parse(self.dsn)
        self.secrets = [self.params.get("password", ""), self.dsn if ":" in self.dsn else ""]
        self.shown = describe(self.params, options.schema)
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

    def _migrate(self, create: bool, target: int = VERSION) -> str:
        with self._connect() as conn, self._guard():
            before, after = migrate(conn, self.options.schema, self.shown, create=create, target=target)
        if before == after:
            return f"Store {self.shown}: schema version {after}, up to date"
        if before is None:
            return f"Store {self.shown}: created, schema version {after}"
        return f"Store {self.shown}: migrated from schema version {before} to {after}"
