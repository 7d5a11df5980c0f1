"""The cache writer: finished executions and judgments made durable within a bounded delay.

A run hands each finished value to a :class:`CacheWriter`; a background thread commits what has
arrived every ``DELAY`` seconds, in one transaction, so a crash (even SIGKILL) loses only the
values finished in the last moment before it, never one that finished long before, and the
system's threads never wait on the disk.
"""

from __future__ import annotations

import threading
from typing import Any

DELAY = 0.1  # seconds a finished value may wait for the next commit (plus the commit's own time)


class CacheWriter:
    """Collects ``(key, value)`` pairs of one cache namespace and commits them in the background.

    A failure to write (a full disk, a read-only store) is raised by the next :meth:`put` or by
    :meth:`close`, never lost in the thread.
    """

    def __init__(self, store: Any, namespace: str, delay: float = DELAY):
        self.store, self.namespace, self.delay = store, namespace, delay
        self.items: list[tuple[str, Any]] = []
        self.written = 0
        self.error: BaseException | None = None
        self.closing = False
        self.ready = threading.Condition()
        self.thread = threading.Thread(target=self._loop, name=f"oloproof-writer-{namespace}", daemon=True)
        self.thread.start()

    def put(self, key: str, value: Any) -> None:
        if self.error is not None:
            self._raise()
        with self.ready:
            self.items.append((key, value))
            if len(self.items) == 1:
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

    def _loop(self) -> None:
        while True:
            with self.ready:
                while not self.items and not self.closing:
                    self.ready.wait()
                if not self.closing:  # gather what finishes meanwhile into the same commit
                    self.ready.wait(self.delay)
                batch, self.items = self.items, []
                closing = self.closing
            if batch and self.error is None:
                try:
                    self.store.cache_put_many(self.namespace, batch)
                    self.written += len(batch)
                except BaseException as exc:  # noqa: BLE001 - handed to the run's thread, raised there
                    self.error = exc
            if closing:
                with self.ready:
                    if not self.items:
                        return
