"""Executing cases: the execution cache first, then the system, concurrently, in case order.

Cache misses run concurrently (threads for a synchronous system, an event loop for an ``aexecute``
one) and are cached as they finish (writer.py commits each within a bounded delay), so an
interrupted or crashed run loses no finished case.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .errors import ArtifactError, CaseMissing, ConfigError
from .identity import combine, digest
from .model import Case, Execution
from .plugins import Plugins
from .recording import Recorder, call_with_recorder
from .suite import Suite
from .writer import CacheWriter


def to_execution(output: Any, recorder: Recorder, case: Case, system: Any, plugins: Plugins,
                 seconds: float) -> Execution:
    """Validate what the system recorded; a malformed or undeclared artifact stops the run."""
    artifacts: dict[str, list] = {}
    for index, (kind, value) in enumerate(recorder.items):
        if kind not in system.records:
            declared = ", ".join(sorted(system.records)) or "nothing"
            raise ArtifactError(f"case {case.id!r}: the system recorded {kind}, which it does not declare "
                                f"(it declares {declared})",
                                fix=f'add "{kind}" to records=(...) in @system, or stop recording it')
        entry = plugins.artifacts.get(kind)
        try:
            data = entry.factory().to_data(value)
        except ArtifactError as exc:
            source = recorder.sources.get(index)
            origin = f" (from {source})" if source else ""
            raise ArtifactError(f"case {case.id!r}: malformed {kind}{origin}: {exc.problem}", fix=exc.fix) from None
        artifacts.setdefault(kind, []).append(data)
    return Execution(output=output, artifacts={k: tuple(v) for k, v in artifacts.items()}, seconds=seconds)


def _json_safe(output: Any, case: Case) -> Any:
    from .identity import canonical

    try:  # serialised once: NaN and Infinity are not JSON a strict parser reads
        canonical(output, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ArtifactError(f"case {case.id!r}: the system returned a value that is not JSON: {exc}",
                            fix="return dicts, lists, strings, numbers, booleans or None") from None
    return output


class Executor:
    """Runs the cache misses of one run and hands each finished execution to ``done``."""

    def __init__(self, suite: Suite, plugins: Plugins):
        self.suite, self.plugins, self.system = suite, plugins, suite.system
        # a system may cap its own concurrency (an HTTP service's limit, say)
        self.concurrency = min(suite.concurrency, getattr(self.system, "concurrency", None) or suite.concurrency)

    def _one(self, case: Case) -> tuple[Any, Recorder, float, str | None]:
        start = time.perf_counter()
        try:
            output, recorder = call_with_recorder(lambda r: self.system.execute(case, r), case)
            return output, recorder, time.perf_counter() - start, None
        except ArtifactError as exc:  # raised by a record type's validator inside the system
            raise ArtifactError(f"case {case.id!r}: {exc.problem}", fix=exc.fix) from None
        except ConfigError:
            raise
        except CaseMissing as exc:
            return None, Recorder(case), time.perf_counter() - start, exc.reason
        except Exception as exc:  # noqa: BLE001 - the system failed on this case: it is missing, the run goes on
            return None, Recorder(case), time.perf_counter() - start, f"error: {type(exc).__name__}: {exc}"

    def finish(self, case: Case, result: tuple) -> Execution:
        output, recorder, seconds, error = result
        if error is not None:
            return Execution(missing=error, seconds=seconds)
        return to_execution(_json_safe(output, case), recorder, case, self.system, self.plugins, seconds)

    def run(self, cases: Sequence[Case], done: Callable[[int, Execution], None]) -> None:
        if hasattr(self.system, "aexecute"):
            import asyncio  # only an asynchronous system's run needs the event loop

            asyncio.run(self._run_async(cases, done))
            return
        if self.concurrency == 1:  # no thread hand-offs: cheaper, and a debugger sees the system
            for i, case in enumerate(cases):
                done(i, self.finish(case, self._one(case)))
            return
        # ``concurrency`` threads pull cases in order and hand each result back through one queue:
        # no future, no per-case wait set, and the results are finished (and cached) here, in
        # this thread, as they arrive
        results: queue.SimpleQueue = queue.SimpleQueue()
        todo, taking, stop = iter(range(len(cases))), threading.Lock(), threading.Event()

        def worker() -> None:
            try:
                while not stop.is_set():
                    with taking:
                        i = next(todo, None)
                    if i is None:
                        return
                    results.put((i, self._one(cases[i])))
            except BaseException as exc:  # noqa: BLE001 - raised in the run's thread, below
                results.put((None, exc))
            finally:
                results.put(None)

        threads = [threading.Thread(target=worker, name=f"oloproof-case-{n}")
                   for n in range(min(self.concurrency, len(cases)))]
        for thread in threads:
            thread.start()
        running = len(threads)
        try:
            while running:
                item = results.get()
                if item is None:
                    running -= 1
                    continue
                i, result = item
                if i is None:
                    raise result
                done(i, self.finish(cases[i], result))
        finally:  # on Ctrl-C or an error, the cases in flight finish and no other starts
            stop.set()

    async def _run_async(self, cases: Sequence[Case], done: Callable[[int, Execution], None]) -> None:
        """``concurrency`` workers pull cases in order, so memory stays flat however many cases."""
        import asyncio

        todo = iter(range(len(cases)))

        async def worker() -> None:
            for i in todo:
                case = cases[i]
                recorder = Recorder(case)
                start = time.perf_counter()
                try:
                    output = await self.system.aexecute(case, recorder)
                    result = (output, recorder, time.perf_counter() - start, None)
                except ArtifactError as exc:
                    raise ArtifactError(f"case {case.id!r}: {exc.problem}", fix=exc.fix) from None
                except ConfigError:
                    raise
                except CaseMissing as exc:
                    result = (None, recorder, time.perf_counter() - start, exc.reason)
                except Exception as exc:  # noqa: BLE001 - the system failed on this case: it is missing
                    result = (None, recorder, time.perf_counter() - start, f"error: {type(exc).__name__}: {exc}")
                done(i, self.finish(case, result))

        workers = [asyncio.ensure_future(worker()) for _ in range(min(self.concurrency, len(cases)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            closer = getattr(self.system, "aclose", None)
            if closer is not None:
                await closer()


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


def execution_key(identity: str, case: Case) -> str:
    """The execution cache key of a case: the digest of the system's identity, the case's input, and
    the trial when it is not the first (so a run without trials keeps its keys, and each trial is
    cached apart)."""
    if case.trial:
        return combine(identity, digest(case.input), digest({"trial": case.trial}))
    return combine(identity, digest(case.input))


def execute_cases(suite: Suite, plugins: Plugins, store: Any, caches: dict, use_cache: bool = True,
                  run_id: str | None = None, progress: Any = None) -> tuple[list[Execution | None], bool]:
    """Every case's execution, from the cache or the system. Returns (executions, interrupted).

    :param progress: told ``start("cases", n)`` for the n cases sent to the system, ``step()`` as
        each finishes, and ``close()`` (a terminal's progress line: outputs/terminal.py).

    Each cached execution carries the id of the run that recorded it; an opaque system's reused
    executions are counted by that run in ``caches["reused"]``.
    """
    system = suite.system
    identity = digest(system.identity)  # once per run, not once per case
    keys = [execution_key(identity, case) for case in suite.cases]
    cached = store.cache_get_many("execution", keys) if reuses_executions(suite, use_cache) else {}
    executions: list[Execution | None] = [None] * len(suite.cases)
    misses = []
    reused: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key in cached:
            executions[i] = Execution.from_data(cached[key])
            origin = cached[key].get("run") or "an earlier run"
            reused[origin] = reused.get(origin, 0) + 1
        else:
            misses.append(i)
    caches["execution"] = [len(keys) - len(misses), len(misses)]
    if reused and getattr(system, "opaque", False):
        caches["reused"] = reused
    if progress is not None:
        progress.start("cases", len(misses))
    writer = CacheWriter(store, "execution")

    def done(j: int, execution: Execution) -> None:
        i = misses[j]
        executions[i] = execution
        if execution.missing is None:
            writer.put(keys[i], {**execution.to_data(), "run": run_id})
        if progress is not None:
            progress.step()

    interrupted = False
    try:
        Executor(suite, plugins).run([suite.cases[i] for i in misses], done)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if progress is not None:
            progress.close()
        writer.close()
    return executions, interrupted
