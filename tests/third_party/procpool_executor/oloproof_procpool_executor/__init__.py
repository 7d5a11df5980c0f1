"""The ``procpool`` executor: a run's cases execute in a pool of worker processes on this machine.

``executor: {type: procpool, workers: 4}`` in oloproof.yaml, or ``oloproof run --executor procpool``.
It is for a system that computes in Python (retrieval, reranking, parsing: work that holds the
GIL), where the ``local`` executor's threads share one core. Each worker process builds the system
once from the suite's file (``work.recipe``), then executes batch after batch of cases, one case at
a time, and sends each execution back. This process alone writes the store and the caches: the
system's stage caches are read in the workers through a read-only handle on the run's store and
written here. Ctrl-C kills the workers and stops the run; it is stored interrupted, and the next
run executes only the rest.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from attrs import frozen

from oloproof import ConfigError, Execution, StageCache, hookimpl


@frozen(kw_only=True)
class Options:
    workers: int = 0  # worker processes (at most the suite's concurrency); 0: one per CPU core
    batch_size: int = 16  # cases sent to a worker at once


# -- in a worker process ------------------------------------------------------------------

_worker: dict[str, Any] = {}  # this worker's recipe, store opener, and (once built) its work


class WorkerStageCache:
    """The system's stage caches in a worker: read from the run's store, opened again here
    read-only; what the system stores is kept and sent back with the batch."""

    def __init__(self, opener: Callable[[], Any] | None, read: bool):
        self.opener, self.read, self.reader = opener, read, None
        self.puts: dict[tuple[str, str], Any] = {}

    def get(self, namespace: str, key: str) -> Any:
        if (namespace, key) in self.puts:
            return self.puts[(namespace, key)] if self.read else None
        if not self.read or self.opener is None:
            return None
        if self.reader is None:
            store = self.opener()
            if hasattr(store, "read_only"):
                store.read_only = True
            self.reader = StageCache(store)
        return self.reader.get(namespace, key)

    def put(self, namespace: str, key: str, value: Any) -> None:
        self.puts[(namespace, key)] = value

    def take(self) -> list[tuple[str, str, Any]]:
        puts, self.puts = self.puts, {}
        return [(namespace, key, value) for (namespace, key), value in puts.items()]


def _start_worker(recipe: Any, opener: Callable[[], Any] | None) -> None:
    # Ctrl-C at a terminal reaches the whole process group: the run's process decides what stops
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker.update(recipe=recipe, opener=opener, counted={})
    atexit.register(_close_worker)


def _close_worker() -> None:
    loop = _worker.get("loop")
    if loop is not None:
        loop.run_until_complete(_worker["work"].aclose())
        loop.close()


def _run_batch(cases: Sequence[Any]) -> tuple[list[dict], list, dict]:
    """One batch, in a worker: (each execution as data, the stage cache's puts,
    the stage hits and misses counted since the last batch)."""
    if "work" not in _worker:  # built at the first batch, so an error in the suite reaches the run
        recipe = _worker["recipe"]
        _worker["cache"] = WorkerStageCache(_worker["opener"], recipe.stage_reads)
        _worker["work"] = recipe.build(Path(recipe.project_dir), _worker["cache"])
    work = _worker["work"]
    if work.is_async:
        import asyncio

        loop = _worker.setdefault("loop", asyncio.new_event_loop())
        executions = [loop.run_until_complete(work.aexecute(case)) for case in cases]
    else:
        executions = [work.execute(case) for case in cases]
    return [e.to_data() for e in executions], _worker["cache"].take(), _stage_counts(work)


def _stage_counts(work: Any) -> dict:
    counts = getattr(work.system, "stage_counts", None)  # a staged system's {stage: (hits, misses)}
    if counts is None:
        return {}
    now, before = {stage: list(c) for stage, c in counts().items()}, _worker["counted"]
    _worker["counted"] = now
    return {stage: [c[0] - before.get(stage, [0, 0])[0], c[1] - before.get(stage, [0, 0])[1]] for stage, c in now.items()}


# -- in the run's process -----------------------------------------------------------------


class ProcPoolExecutor:
    """Sends a run's cases to worker processes in batches; ``done`` is called here as each returns."""

    def __init__(self, options: Options | None):
        self.options = options or Options()
        if self.options.workers < 0 or self.options.batch_size < 1:
            raise ConfigError("workers must be 0 or more and batch_size at least 1", fix="write workers: 2, batch_size: 16")
        self.pool: ProcessPoolExecutor | None = None  # kept across a run's batches, until close()

    def _pool(self, work: Any) -> ProcessPoolExecutor:
        if self.pool is None:
            if work.recipe is None:
                raise ConfigError("executor procpool needs a suite file its workers can read", fix="run with a suite")
            workers = min(self.options.workers or os.cpu_count() or 1, work.concurrency)
            # spawn: a fresh interpreter per worker, never a fork of this process and its threads
            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                            initializer=_start_worker, initargs=(work.recipe, work.store_opener))
        return self.pool

    def run(self, work: Any, cases: Sequence[Any], done: Callable[[int, Any], None]) -> None:
        """One batch of a run's cases (a run may call it many times, then :meth:`close`)."""
        if not cases:
            return
        size, broken = self.options.batch_size, False
        try:
            pool = self._pool(work)
            futures = {pool.submit(_run_batch, cases[k:k + size]): k for k in range(0, len(cases), size)}
            for future in as_completed(futures):
                first = futures[future]
                try:
                    executions, puts, stages = future.result()
                except BrokenProcessPool as exc:  # a worker died (killed, out of memory): these cases are missing
                    broken = True
                    for i in range(first, min(first + size, len(cases))):
                        done(i, Execution(missing=f"error: procpool worker lost: {exc}"))
                    continue
                for namespace, key, value in puts:
                    if work.stage_cache is not None:
                        work.stage_cache.put(namespace, key, value)
                work.count_stages(stages)
                for i, data in enumerate(executions, first):
                    done(i, Execution.from_data(data))
        except BaseException:  # Ctrl-C (KeyboardInterrupt), or an error that stops the run: no worker goes on
            self._stop()
            raise
        if broken:
            self._stop()  # the next batch starts new workers

    def _stop(self) -> None:
        """Kill the workers, busy or not, and wait for them to be gone."""
        pool, self.pool = self.pool, None
        if pool is None:
            return
        kill = getattr(pool, "kill_workers", None)  # Python 3.14+
        if kill is not None:
            kill()
        else:  # before 3.14, ProcessPoolExecutor has no public way to end a busy worker
            for process in list((getattr(pool, "_processes", None) or {}).values()):
                process.kill()
        pool.shutdown(wait=True, cancel_futures=True)

    def close(self, work: Any) -> None:
        """After a run's last batch: the workers end (an asynchronous system's connections closed there)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=True)


@hookimpl
def oloproof_register_executors(registry):
    registry.add("procpool", ProcPoolExecutor, options=Options)
