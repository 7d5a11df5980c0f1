"""Which store a command uses, and copying runs and objects from one store to another.

A command's store is, first to last: ``--store``, the suite's ``store:``, ``OLOPROOF_STORE``,
the local store. ``--store`` and ``OLOPROOF_STORE`` take a store type (``local``), a URL whose
scheme a store registered (``postgresql://...``), or a YAML flow mapping (``{type: postgres,
dsn: "${OLOPROOF_DSN}", schema: team}``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from oloproof_core.config.documents import structure
from oloproof_core.model.errors import ConfigError, OloproofError
from oloproof_core.storage.runs import store_spec, write_run

ENV = "OLOPROOF_STORE"


def open_store(entry: Any, options: Any, project_dir: Path) -> Any:
    """A store made by its plugin, with ``reopen``: a picklable callable that opens the same store
    again (in another process on this machine: the ray executor's stage-cache reader)."""
    from functools import partial

    store = entry.factory(options, project_dir)
    try:
        store.reopen = partial(entry.factory, options, project_dir)
    except AttributeError:  # a store that takes no new attributes is simply not reopened
        pass
    return store


def open_spec(plugins: Any, project_dir: Path, text: str, where: str) -> Any:
    """The store that ``--store``/``OLOPROOF_STORE`` names (``where`` says which of the two)."""
    store_type, data = store_spec(text, plugins.stores, where)
    entry = plugins.stores.get(store_type, where=where)
    if entry.options is None:
        if data:
            raise ConfigError(f"store {store_type!r} takes no options", where=where, fix="name only its type")
        return open_store(entry, None, project_dir)
    try:
        options = structure(None, data, entry.options, (), what=f"store {store_type!r}")
    except ConfigError as exc:
        inside = (exc.where or "").lstrip("$").lstrip(".")
        located = inside and f"'{inside.split('.')[-1]}'" not in exc.problem
        raise ConfigError(f"{inside}: {exc.problem}" if located else exc.problem, where=where, fix=exc.fix) from None
    return open_store(entry, options, project_dir)


def from_environment(plugins: Any, project_dir: Path) -> Any | None:
    text = os.environ.get(ENV, "")
    return open_spec(plugins, project_dir, text, ENV) if text.strip() else None


class BufferedWriter:
    """``run_writer``'s writer for a store without ``begin_run``: the records are kept in memory
    and written by the store's ``save_run`` at ``finish`` (a third-party store that has only
    ``save_run`` keeps working; its runs are held whole, as before)."""

    def __init__(self, store: Any, run_id: str):
        self.store, self.run_id, self.records = store, run_id, []

    def add(self, records: Any) -> None:
        self.records.extend(records)

    def finish(self, header: dict, summary: dict) -> None:
        self.store.save_run(header, self.records, summary)
        self.records = []

    def abort(self) -> None:
        self.records = []


def run_writer(store: Any, run_id: str) -> Any:
    """The writer of a new run in ``store``: ``add(records)`` in case order, then ``finish(header,
    summary)``, or ``abort()`` on an error (docs/stores.md): the store's own ``begin_run`` when it
    has one, else a ``BufferedWriter``."""
    begin = getattr(store, "begin_run", None)
    return begin(run_id) if begin is not None else BufferedWriter(store, run_id)


def copy_runs(source: Any, target: Any) -> dict:
    """Copy every run and object of ``source`` that ``target`` lacks; what is there is skipped, so
    copying twice copies nothing the second time. Each run is streamed in case order from one
    store to the other (never held whole) and appears in the target when its last record is
    there, in id order (a diagnosis's child runs before it), then the objects oldest first."""
    if identity(source) == identity(target):
        raise OloproofError("--from and --to name the same store", fix="name another store with --to")
    if not hasattr(source, "all_objects"):
        raise OloproofError("the source store cannot list its objects", fix="upgrade the store's plugin")
    there = {header["id"] for header in target.list_runs()}
    counts = {"runs": 0, "runs_there": 0, "objects": 0, "objects_there": 0}
    for header in source.list_runs():
        run_id = header["id"]
        if run_id in there:
            counts["runs_there"] += 1
            continue
        stored, summary = source.get_run(run_id)
        write_run(run_writer(target, run_id), stored, source.run_cases(run_id), summary)
        counts["runs"] += 1
    present = {object_id for object_id, _, _ in target.all_objects()} if hasattr(target, "all_objects") else set()
    for object_id, kind, record in source.all_objects():
        if object_id in present:
            counts["objects_there"] += 1
            continue
        target.put_object(kind, object_id, record)
        counts["objects"] += 1
    return counts


def identity(store: Any) -> tuple:
    """What tells two stores apart: a file store's resolved path, else the name it shows."""
    path = getattr(store, "path", None)
    if path is not None:
        return type(store).__name__, str(Path(path).resolve())
    return type(store).__name__, getattr(store, "shown", id(store))

