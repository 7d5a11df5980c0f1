"""The ``local`` executor: this machine's threads for a synchronous system, one event loop for an
``aexecute`` one. It is the default (``executor: local``, or no ``executor:`` at all)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from oloproof import hookimpl

# A synchronous call quicker than QUICK gains nothing from a thread (the GIL runs one at a time) and
# pays the hand-off to and from it: such a system is called inline (see LocalExecutor.run) until a
# call takes longer than SLOW, or SLOW_RUN calls in a row take longer than QUICK.
QUICK, SLOW, SLOW_RUN = 100e-6, 0.05, 3


class LocalExecutor:
    """Runs a run's cases ``work.concurrency`` at a time and hands each to ``done`` as it finishes."""

    def __init__(self, options: Any = None):
        self.runner: Any = None  # an asynchronous system's event loop, kept across a run's batches
        self.threads: list[threading.Thread] = []  # a synchronous system's, kept across a run's batches
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.inline = True  # the run's synchronous system is still called inline
        self.slow = 0  # calls in a row that took longer than QUICK

    def run(self, work: Any, cases: Sequence[Any], done: Callable[[int, Any], None]) -> None:
        """One batch of a run's cases (a run may call it many times, then :meth:`close`)."""
        if work.is_async:
            if self.runner is None:
                import asyncio  # only an asynchronous system's run needs the event loop

                self.runner = asyncio.Runner()  # Ctrl-C cancels the batch's workers, as asyncio.run does
            self.runner.run(self._run_async(work, cases, done))
            return
        # Calls are made inline, one at a time: always at concurrency 1 (no thread hand-offs, and a
        # debugger sees the system), else while they are quick; once they are not (a system waiting
        # on a service, say) the rest of the run goes to the threads.
        start = 0
        while (self.inline or work.concurrency == 1) and start < len(cases):
            began = time.perf_counter()
            execution = work.execute(cases[start])
            took = time.perf_counter() - began
            self.slow = self.slow + 1 if took > QUICK else 0
            self.inline = took <= SLOW and self.slow < SLOW_RUN
            done(start, execution)
            start += 1
        if start == len(cases):
            return
        self._run_threads(work, cases, done, start)

    def _run_threads(self, work: Any, cases: Sequence[Any], done: Callable[[int, Any], None], start: int) -> None:
        # ``concurrency`` threads pull cases in order and hand each execution back through one
        # queue: no future and no wait set per case; ``done`` runs here, in the run's thread. The
        # threads live across the run's batches (``close`` ends them).
        results: queue.SimpleQueue = queue.SimpleQueue()
        wanted = min(work.concurrency, len(cases) - start)
        stop = threading.Event()
        job = (work, cases, iter(range(start, len(cases))), threading.Lock(), stop, results)
        while len(self.threads) < wanted:
            thread = threading.Thread(target=self._worker, name=f"oloproof-case-{len(self.threads)}", daemon=True)
            thread.start()
            self.threads.append(thread)
        for _ in range(wanted):
            self.jobs.put(job)
        running = wanted
        try:
            while running:
                item = results.get()
                if item is None:
                    running -= 1
                    continue
                i, result = item
                if i is None:
                    raise result
                done(i, result)
        finally:  # on Ctrl-C or an error, the cases in flight finish and no other starts
            stop.set()

    def _worker(self) -> None:
        """One thread: the cases of each batch it is given, until ``close``. Waiting for the next
        batch it holds nothing of the last (its work, the run's store: the command's exit closes
        the store once nothing holds it)."""
        while (job := self.jobs.get()) is not None:
            self._batch(*job)
            del job

    @staticmethod
    def _batch(work: Any, cases: Sequence[Any], todo: Any, taking: Any, stop: Any, results: Any) -> None:
        try:
            while not stop.is_set():
                with taking:
                    i = next(todo, None)
                if i is None:
                    break
                results.put((i, work.execute(cases[i])))
        except BaseException as exc:  # noqa: BLE001 - raised in the run's thread
            results.put((None, exc))
        finally:
            results.put(None)

    async def _run_async(self, work: Any, cases: Sequence[Any], done: Callable[[int, Any], None]) -> None:
        """``concurrency`` workers pull cases in order, so memory stays flat however many cases.

        A worker whose call came back starts its next call before the case is concluded (checked,
        recorded, handed to ``done``): that happens on the loop's next turn. Calls that come back
        together (a service's latency) are then not each held up by the checking of the others."""
        import asyncio

        todo = iter(range(len(cases)))
        called: dict[int, tuple] = {}  # cases whose call came back, not concluded yet
        failed: list[BaseException] = []
        loop = asyncio.get_running_loop()

        def finish(i: int) -> None:
            outcome = called.pop(i, None)
            if outcome is None or failed:
                return
            try:
                done(i, work.conclude(outcome))
            except BaseException as exc:  # noqa: BLE001 - raised where the workers are awaited
                failed.append(exc)

        async def worker() -> None:
            for i in todo:
                if failed:
                    return
                called[i] = await work.acall(cases[i])
                loop.call_soon(finish, i)

        workers = [asyncio.ensure_future(worker()) for _ in range(min(work.concurrency, len(cases)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            for i in sorted(called):  # calls that came back: concluded, even when Ctrl-C stops the batch
                finish(i)
        if failed:
            raise failed[0]

    def close(self, work: Any) -> None:
        """After a run's last batch: the threads told to end (one still finishing a case after
        Ctrl-C is not waited for), the system's connections closed, then the event loop."""
        for _ in self.threads:
            self.jobs.put(None)
        self.threads = []
        self.inline, self.slow = True, 0
        if self.runner is not None:
            try:
                self.runner.run(work.aclose())
            finally:
                self.runner.close()
                self.runner = None


@hookimpl
def oloproof_register_executors(registry):
    registry.add("local", LocalExecutor)
