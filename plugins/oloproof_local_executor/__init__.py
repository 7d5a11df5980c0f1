"""The ``local`` executor: this machine's threads for a synchronous system, one event loop for an
``aexecute`` one. It is the default (``executor: local``, or no ``executor:`` at all)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from oloproof import hookimpl


class LocalExecutor:
    """Runs a run's cases ``work.concurrency`` at a time and hands each to ``done`` as it finishes."""

    def __init__(self, options: Any = None):
        pass

    def run(self, work: Any, cases: Sequence[Any], done: Callable[[int, Any], None]) -> None:
        if work.is_async:
            asyncio.run(self._run_async(work, cases, done))
            return
        if work.concurrency == 1:  # no thread hand-offs: cheaper, and a debugger sees the system
            for i, case in enumerate(cases):
                done(i, work.execute(case))
            return
        window = work.concurrency * 4
        pool = ThreadPoolExecutor(max_workers=work.concurrency, thread_name_prefix="oloproof-case")
        pending: dict = {}
        index = 0
        try:
            while index < len(cases) or pending:
                while index < len(cases) and len(pending) < window:
                    pending[pool.submit(work.execute, cases[index])] = index
                    index += 1
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    done(pending.pop(future), future.result())
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=False, cancel_futures=True)

    async def _run_async(self, work: Any, cases: Sequence[Any], done: Callable[[int, Any], None]) -> None:
        """``concurrency`` workers pull cases in order, so memory stays flat however many cases."""
        todo = iter(range(len(cases)))

        async def worker() -> None:
            for i in todo:
                done(i, await work.aexecute(cases[i]))

        workers = [asyncio.ensure_future(worker()) for _ in range(min(work.concurrency, len(cases)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for task in workers:
                task.cancel()
            await work.aclose()


@hookimpl
def oloproof_register_executors(registry):
    registry.add("local", LocalExecutor)
