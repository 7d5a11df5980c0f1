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

import sqlite3
import threading
from pathlib import Path

from attrs import frozen

from oloproof import hookimpl, store_key

from .cache import CHUNK, Caches
from .connection import CHECK, Connections
from .integrity import check_store, repair_store
from .objects import Objects
from .query import Query
from .runs import LocalWriter, Runs
from .schema import CACHE_KIB, CHECKPOINT_PAGES, COLUMNS, SCHEMA, Tables

__all__ = ["CACHE_KIB", "CHECK", "CHECKPOINT_PAGES", "CHUNK", "COLUMNS", "SCHEMA", "LocalStore", "LocalWriter", "Options",
           "oloproof_register_stores"]


@frozen(kw_only=True)
class Options:
    path: str = ".oloproof"


class LocalStore(Connections, Tables, Caches, Runs, Query, Objects):
    """Runs, caches and objects in ``<project>/.oloproof/store.db``.

    ``read_only = True`` (set before the first use) opens the database read-only: the reading
    commands work in a store they may not write.
    """

    def __init__(self, options: Options | None, project_dir: Path):
        self.root = Path(project_dir) / (options.path if options else ".oloproof")
        self.path = self.root / "store.db"
        self.read_only = False
        self.damaged: dict[str, int] = {}  # cache namespace -> values that failed their checksum
        self.damaged_runs: list[str] = []  # runs list_runs left out: damaged, or an id oloproof never makes
        self.key = store_key(project_dir)  # the store key: keyed checksums (docs/stores.md)
        self._copy: str | None = None  # the private copy a read-only handle reads (see Tables._open_read_only)
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._batch = 0
        self._owner: int | None = None  # the thread whose write transaction is open
        self._reader: sqlite3.Connection | None = None  # reads by other threads (see _read)
        self._read_lock = threading.Lock()
        # integrity columns, or NULL where a store opened read-only was made before them
        self.seal, self.case_sum, self.cache_sum, self.object_sum = "seal", "checksum", "checksum", "checksum"
        self.writers = True  # the writers table is there (a store made before it, opened read-only: not)
        self.missing: list[str] = []  # the store's tables a non-empty database file lacks (read-only)

    @property
    def shown(self) -> str:
        return f"{self.root.name}/store.db"

    # -- the whole store -----------------------------------------------------------------

    def check(self) -> dict:
        """Verify everything stored (integrity.check_store): the counts, and one line a problem."""
        return check_store(self)

    def repair(self) -> dict:
        """Remove the damaged cache values and quarantine the damaged runs (integrity.repair_store)."""
        return repair_store(self)

    def sign(self) -> dict:
        """Sign the rows stored before the store key with it (signing.sign_store)."""
        from .signing import sign_store

        return sign_store(self)


@hookimpl
def oloproof_register_stores(registry):
    registry.add("local", LocalStore, options=Options)
