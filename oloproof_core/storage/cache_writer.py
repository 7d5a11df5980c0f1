"""The cache writer: finished executions and judgments made durable within a bounded delay.

A run hands each finished value to a :class:`CacheWriter`; a background thread commits what has
arrived every ``DELAY`` seconds, in one transaction, so a crash (even SIGKILL) loses only the
values finished in the last moment before it, never one that finished long before, and the
system's threads never wait on the disk. One writer serves every namespace of a run
(:meth:`CacheWriter.to`): the executions and the judgments that arrived together are one commit.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

DELAY = 0.1  # seconds a finished value may wait for the next commit (plus the commit's own time)


def row_fault(exc: BaseException) -> bool:
    """Whether a store refused a write for what a row holds (text it cannot encode, a value it
    cannot serialise), not for what the store is (full, read-only, gone)."""
    seen: BaseException | None = exc
    for _ in range(4):  # a store may wrap the driver's error in its own (its cause or context)
        if seen is None:
            return False
        if isinstance(seen, (ValueError, TypeError, RecursionError)) or type(seen).__name__ == "DataError":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class CacheWriter:
    """Collects ``(key, value)`` pairs of one cache namespace and commits them in the background;
    :meth:`to` gives a writer of another namespace sharing the thread and its commits.

    A failure to write (a full disk, a read-only store) is raised by the next :meth:`put` or by
    :meth:`close`, never lost in the thread. A batch the store refuses is written again row by
    row, so a row it cannot keep costs that one value (counted in :attr:`dropped`: it is simply not
    cached, and the next run makes it again), never the batch, the run, or a paid judgment.
    """

    def __init__(self, store: Any, namespace: str, delay: float = DELAY):
        self.store, self.namespace, self.delay = store, namespace, delay
        self.items: dict[str, list[tuple[str, Any]]] = {}  # namespace -> what arrived since the last commit
        self.written = 0
        self.dropped = 0  # values the store refused one by one (row_fault): not cached
        self.error: BaseException | None = None
        self.closing = False
        self.ready = threading.Condition(threading.Lock())  # a plain lock: put takes it once a value
        self.thread = threading.Thread(target=self._loop, name="oloproof-writer", daemon=True)
        self.thread.start()

    def to(self, namespace: str) -> Namespace:
        """A writer of ``namespace`` whose values go into this writer's commits (closed with it)."""
        return Namespace(self, namespace)

    def put(self, key: str, value: Any) -> None:
        self.add(self.namespace, [(key, value)])

    def put_many(self, items: list[tuple[str, Any]]) -> None:
        """:meth:`put` of each item, under one hold of the lock."""
        self.add(self.namespace, items)

    def add(self, namespace: str, items: list[tuple[str, Any]]) -> None:
        """``items`` of ``namespace`` into the next commit, under one hold of the lock."""
        if self.error is not None:
            self._raise()
        if items:
            with self.ready:
                waiting = not self.items
                self.items.setdefault(namespace, []).extend(items)
                if waiting:
                    self.ready.notify()

    def close(self) -> None:
        """Commit what is left and stop the thread; raise the first write failure, if any."""
        with self.ready:
            self.closing = True
            self.ready.notify()
        self.thread.join()
        if self.error is not None:
            self._raise()

    def _raise(self) -> None:
        error, self.error = self.error, None
        raise error

    def _write(self, batch: dict[str, list[tuple[str, Any]]]) -> None:
        """One commit of the batch (every namespace's rows in one transaction, where the store has
        ``batch()``); if the store refuses it, each row on its own (row_fault)."""
        together = getattr(self.store, "batch", None)
        try:
            with together() if together is not None else contextlib.nullcontext():
                for namespace in sorted(batch):  # one order in every writer: two runs' row locks never cross
                    self.store.cache_put_many(namespace, batch[namespace])
            self.written += sum(len(items) for items in batch.values())
            return
        except Exception as exc:  # noqa: BLE001 - sorted below: a row's fault or the store's
            first = exc
        rows = [(namespace, item) for namespace, items in batch.items() for item in items]
        if len(rows) == 1 and not row_fault(first):
            raise first
        written, refused = 0, []
        for namespace, item in rows:
            try:
                self.store.cache_put_many(namespace, [item])
                written += 1
            except Exception as exc:  # noqa: BLE001 - one row: its own fault if the others went in
                refused.append(exc)
        if refused and not written and not all(row_fault(exc) for exc in refused):
            raise first  # every row failed, not for what it holds: the store's fault (a full disk)
        self.written += written
        self.dropped += len(refused)

    def _loop(self) -> None:
        while True:
            with self.ready:
                while not self.items and not self.closing:
                    self.ready.wait()
                if not self.closing:  # gather what finishes meanwhile into the same commit
                    self.ready.wait(self.delay)
                batch, self.items = self.items, {}
                closing = self.closing
            if batch and self.error is None:
                try:
                    self._write(batch)
                except BaseException as exc:  # noqa: BLE001 - handed to the run's thread, raised there
                    self.error = exc
            if closing:
                with self.ready:
                    if not self.items:
                        return


class Namespace:
    """A :class:`CacheWriter`'s puts into another namespace (:meth:`CacheWriter.to`)."""

    def __init__(self, writer: CacheWriter, namespace: str):
        self.writer, self.namespace = writer, namespace

    def put(self, key: str, value: Any) -> None:
        self.writer.add(self.namespace, [(key, value)])

    def put_many(self, items: list[tuple[str, Any]]) -> None:
        self.writer.add(self.namespace, items)
