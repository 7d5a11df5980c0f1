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

from pathlib import Path
from typing import Any

from attrs import frozen

from oloproof import hookimpl

from .connection import schema_ok

__all__ = ["CHUNK", "RETRIES", "Options", "PostgresStore", "PostgresWriter", "oloproof_register_stores", "open_store",
           "schema_ok"]


@frozen(kw_only=True)
class Options:
    dsn: str  # postgresql://user@host:5432/db or key=value pairs; may use ${ENV_VAR}
    schema: str = "oloproof"  # the PostgreSQL schema holding the tables: one per team or project
    pool_size: int = 4  # connections per command at most
    connect_timeout: int = 10  # seconds to reach the server


# What the store's class is made of, imported when a store is opened: a command that does not use
# PostgreSQL (every local run) does not load the pool, the queries and the rest.
_LAZY = {"PostgresStore": ".store", "PostgresWriter": ".runs", "CHUNK": ".cache", "RETRIES": ".pool", "schema": ".schema"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = importlib.import_module(_LAZY[name], __name__)
    value = module if name == "schema" else getattr(module, name)
    globals()[name] = value
    return value


def open_store(options: Options, project_dir: Path | None = None) -> Any:
    """A ``PostgresStore`` (the store's class, imported here)."""
    from .store import PostgresStore

    return PostgresStore(options, project_dir)


@hookimpl
def oloproof_register_stores(registry):
    registry.add("postgres", open_store, options=Options, url_schemes=("postgresql", "postgres"), shorthand="dsn")
