"""Which store a command uses, and copying runs and objects from one store to another.

A command's store is, first to last: ``--store``, the suite's ``store:``, ``OLOPROOF_STORE``,
the local store. ``--store`` and ``OLOPROOF_STORE`` take a store type (``local``), a URL whose
scheme a store registered (``postgresql://...``), or a YAML flow mapping (``{type: postgres,
dsn: "${OLOPROOF_DSN}", schema: team}``).
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any

from oloproof_core.config.documents import structure
from oloproof_core.model.errors import ConfigError, OloproofError
from oloproof_core.storage.runs import store_spec, write_run

ENV = "OLOPROOF_STORE"

# Every store this process opened and still holds, for close_opened (weakly: a store nobody
# holds is the garbage collector's, as before)
_OPENED: weakref.WeakSet = weakref.WeakSet()


def open_store(entry: Any, options: Any, project_dir: Path) -> Any:
    """A store made by its plugin, with ``reopen``: a picklable callable that opens the same store
    again (in another process on this machine: the ray executor's stage-cache reader)."""
    from functools import partial

    store = entry.factory(options, project_dir)
    try:
        store.reopen = partial(entry.factory, options, project_dir)
    except AttributeError:  # a store that takes no new attributes is simply not reopened
        pass
    try:
        _OPENED.add(store)
    except TypeError:  # a store that cannot be referred to weakly is left to the interpreter's exit
        pass
    return store


def close_opened() -> None:
    """Call ``close()`` on every store this process opened and still holds (those that have one).

    The command line calls it when a command ends, so a store's connections are closed (SQLite's
    write-ahead log checkpointed and removed) without a full garbage collection at exit, about a
    tenth of a short command's CPU (benchmarks/startup_vs.py)."""
    for store in list(_OPENED):
        close = getattr(store, "close", None)
        if callable(close):
            close()


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


def resolve_reference(store: Any, reference: str) -> str:
    """The run id that ``reference`` names: a run id or an unambiguous prefix of one, ``latest``
    (the newest run of the project), ``latest~N`` (the N-th run before it) or ``previous`` (the
    run before it, ``latest~1``). As for ``latest``, a diagnosis's child runs are not counted."""
    import re

    if reference == "previous":
        reference = "latest~1"
    counted = re.fullmatch(r"latest~(.*)", reference, flags=re.S)
    if counted is None:
        return store.resolve_run(reference)
    if not counted.group(1).isascii() or not counted.group(1).isdigit():
        from oloproof_core.storage.runs import shown_text

        raise ConfigError(f"{shown_text(reference, 40)!r} names no run: ~ takes a number of runs back",
                          fix="write latest~1 (or previous) for the run before the newest, latest~2 for the one before it")
    back = int(counted.group(1))
    if back == 0:
        return store.resolve_run("latest")
    ids = sorted((h["id"] for h in store.list_runs() if not h.get("parent")), reverse=True)
    if back >= len(ids):
        have = f"{len(ids)} run{'' if len(ids) == 1 else 's'}"
        raise ConfigError(f"{reference} names no run: the store has {have} (a diagnosis's child runs aside)",
                          fix="list them with `oloproof runs`" + (f"; latest~{len(ids) - 1} is the oldest" if ids else
                                                                  "; start one with `oloproof run`"))
    return store.resolve_run(ids[back])


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

