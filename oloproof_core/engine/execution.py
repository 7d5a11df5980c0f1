"""Executing cases: the execution cache first, then the suite's executor for the misses.

The executor (a plugin: ``local`` runs threads or an event loop, ``ray`` a cluster) calls
:class:`CaseWork` per case and hands each finished execution back here, where it is cached as it
arrives (writer.py commits each within a bounded delay), so an interrupted or crashed run loses no
finished case. Only this process writes the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from oloproof_core.model.identity import combine, digest
from oloproof_core.model.records import Case, Execution
from oloproof_core.hooks.manager import Plugins
from oloproof_core.engine.suite import Suite
from oloproof_core.storage.cache_writer import CacheWriter
from oloproof_core.engine.work import CaseWork


def executor_of(suite: Suite, plugins: Plugins) -> Any:
    """The suite's executor (``executor:``, ``--executor``); the builtin ``local`` one by default."""
    return suite.executor or plugins.executors.get("local").factory(None)


def reuses_executions(suite: Suite, use_cache: bool = True) -> bool:
    """Whether this run may take executions from the cache.

    A system whose code is fingerprinted (``callable``, ``rag``) has an identity that changes with
    its code, so its cached executions are what it would return. An *opaque* system (``http``, or
    any system that sets ``opaque = True``: its identity cannot see what answers behind it) is
    re-executed on every run unless the suite says ``system.cache: reuse``.
    """
    if not use_cache or suite.executions == "refresh":
        return False
    return suite.executions == "reuse" or not getattr(suite.system, "opaque", False)


def holds_executions(store: Any) -> bool:
    """Whether the store may hold a cached execution: False only when it says its ``execution``
    namespace is empty (``cache_holds``, an optional store member); a store without it is asked."""
    holds = getattr(store, "cache_holds", None)
    return holds is None or bool(holds("execution"))


def execution_key(identity: str, case: Case) -> str:
    """The execution cache key of a case: the digest of the system's identity, the case's input, and
    the trial when it is not the first (so a run without trials keeps its keys, and each trial is
    cached apart); a conversation's later turn adds the history it was given (a changed earlier
    turn, or output, misses every later turn)."""
    parts = [digest(case.input)]
    if case.trial:
        parts.append(digest({"trial": case.trial}))
    if case.history:
        parts.append(digest({"history": case.history_data()}))
    return combine(identity, *parts)


class Executions:
    """One run's executions, batch by batch (:meth:`batch`): the cache first, then the suite's
    executor for the misses, each finished execution cached as it arrives; :meth:`close` once at
    the end. The executor, the system's connections and the cache writer live across batches.

    :param progress: told ``start("cases", n)`` for the n cases of a batch sent to the system,
        ``step()`` as each finishes, and ``close()`` (a terminal's progress line: outputs/terminal.py).

    :param writer: the run's cache writer (for namespace ``execution``), when it has one for every
        namespace; None: one of its own.

    Each cached execution carries the id of the run that recorded it; an opaque system's reused
    executions are counted by that run in ``caches["reused"]``.
    """

    def __init__(self, suite: Suite, plugins: Plugins, store: Any, caches: dict, use_cache: bool = True,
                 run_id: str | None = None, progress: Any = None, writer: CacheWriter | None = None):
        self.suite, self.store, self.caches, self.run_id, self.progress = suite, store, caches, run_id, progress
        self.identity = digest(suite.system.identity)  # once per run, not once per case
        # a store whose execution cache is empty when the run begins is not asked for each case
        self.reuse = reuses_executions(suite, use_cache) and holds_executions(store)
        self.opaque = getattr(suite.system, "opaque", False)
        caches.setdefault("execution", [0, 0])
        self.own = writer is None  # a writer of its own, closed by close(); else the run's, which closes it
        self.writer = CacheWriter(store, "execution") if writer is None else writer
        self.work = CaseWork(suite.system, plugins, suite.concurrency, suite.recipe, store, suite.stage_cache)
        self.executor = executor_of(suite, plugins)

    def batch(self, cases: Sequence[Case]) -> tuple[list[Execution | None], bool]:
        """The executions of ``cases`` (None: not finished when Ctrl-C stopped it), and whether it did."""
        keys = [execution_key(self.identity, case) for case in cases]
        cached = self.store.cache_get_many("execution", keys) if self.reuse else {}
        executions: list[Execution | None] = [None] * len(cases)
        misses = []
        reused: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key in cached:
                executions[i] = Execution.from_data(cached[key])
                origin = cached[key].get("run") or "an earlier run"
                reused[origin] = reused.get(origin, 0) + 1
            else:
                misses.append(i)
        figures = self.caches["execution"]
        figures[0] += len(keys) - len(misses)
        figures[1] += len(misses)
        if reused and self.opaque:
            total = self.caches.setdefault("reused", {})
            for origin, n in reused.items():
                total[origin] = total.get(origin, 0) + n
        if not misses:
            return executions, False
        progress, writer, run_id = self.progress, self.writer, self.run_id
        if progress is not None:
            progress.start("cases", len(misses))

        def done(j: int, execution: Execution) -> None:
            i = misses[j]
            executions[i] = execution
            if execution.missing is None:
                value = execution.to_data()
                value["run"] = run_id
                writer.put(keys[i], value)
            if progress is not None:
                progress.step()

        interrupted = False
        try:
            self.executor.run(self.work, [cases[i] for i in misses], done)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            if progress is not None:
                progress.close()
        return executions, interrupted

    def close(self) -> None:
        """Release the executor (its workers, the system's connections) and commit the cache."""
        try:
            closer = getattr(self.executor, "close", None)
            if closer is not None:
                closer(self.work)
        finally:
            if self.own:
                self.writer.close()
        if self.work.remote_stages:
            self.caches["remote_stages"] = self.work.remote_stages


def execute_cases(suite: Suite, plugins: Plugins, store: Any, caches: dict, use_cache: bool = True,
                  run_id: str | None = None, progress: Any = None) -> tuple[list[Execution | None], bool]:
    """Every case's execution, from the cache or the system, in one batch (:class:`Executions`).
    Returns (executions, interrupted)."""
    executions = Executions(suite, plugins, store, caches, use_cache, run_id, progress)
    try:
        return executions.batch(list(suite.cases))
    finally:
        executions.close()
