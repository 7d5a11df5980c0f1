"""Choosing an executor: the suite's `executor:`, `--executor`, and their errors (exit 2, before
anything runs). Runs on a Ray cluster are in tests/test_ray_executor.py."""

from __future__ import annotations

import json

from conftest import case


def test_an_explicit_local_executor_is_the_default_one(project):
    project.cases([case(i) for i in range(6)])
    default = project.run("run")
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "executor: local\n")
    explicit = project.run("run", "--no-cache")
    assert default.code == explicit.code == 0
    assert "6 / 6 observed" in explicit.out


def test_an_unknown_executor_is_located_with_the_choices(project):
    project.cases([case(0)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "executor: rayy\n")
    result = project.run("run")
    assert result.code == 2
    assert "oloproof.yaml:8" in result.err and "'rayy'" in result.err and "ray" in result.err, result
    assert project.runs() == []


def test_bad_executor_options_stop_before_anything_runs(project):
    project.cases([case(0)])
    base = (project.root / "oloproof.yaml").read_text()
    project.write("oloproof.yaml", base + "executor: {type: ray, replicas: 0}\n")
    result = project.run("run")
    assert result.code == 2 and "replicas must be at least 1" in result.err and "oloproof.yaml:8" in result.err, result
    project.write("oloproof.yaml", base + "executor: {type: ray, replica: 2}\n")
    result = project.run("run")
    assert result.code == 2 and "'replica'" in result.err and "replicas" in result.err, result
    assert project.runs() == []


def test_the_command_line_replaces_the_suites_executor(project):
    project.cases([case(i) for i in range(3)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text()
                  + "executor: {type: ray, address: 127.0.0.1:1}\n")  # nothing listens there
    result = project.run("run", "--executor", "local")
    assert result.code == 0 and "3 / 3 observed" in result.out, result
    wrong = project.run("run", "--executor", "threads")
    assert wrong.code == 2 and "--executor" in wrong.err and "local" in wrong.err, wrong


THREADS_APP = '''
import threading, time

from oloproof import system

@system(name="threads", version="1")
def run(input):
    if input.get("sleep"):
        time.sleep(input["sleep"])
    return {"answer": input["q"], "thread": threading.current_thread().name}
'''


def threads_used(project, sleep: float, n: int) -> list[str]:
    """The thread each case's system call ran on, in case order (from the run's exported records)."""
    project.write("app.py", THREADS_APP)
    project.cases([case(i, sleep=sleep) for i in range(n)])
    result = project.run("run")
    assert result.code == 0 and f"{n} / {n} observed" in result.out, result.text
    run_id = project.runs()[-1]
    assert project.run("export", run_id).code == 0
    lines = (project.root / ".oloproof" / "bundles" / run_id / "cases.jsonl").read_text().splitlines()
    return [json.loads(line)["output"]["thread"] for line in lines]


def test_a_quick_synchronous_system_is_called_in_the_run_s_own_thread(project):
    """concurrency 8 (the default), calls of microseconds: no thread would make them faster. (Only
    three calls in a row over 0.1 ms, or one over 50 ms, send the rest to the threads: on a machine
    loaded enough to slow three calls in a row that is what happens, so the first three are what
    is certain; on any other, all of them.)"""
    names = threads_used(project, 0, 40)
    inline = names.count("MainThread")
    assert inline >= 3 and names[:inline] == ["MainThread"] * inline  # inline first, threads (if ever) after
    assert all(name.startswith("oloproof-case-") for name in names[inline:])


def test_a_synchronous_system_that_waits_goes_to_the_threads_after_its_first_call(project):
    """A call over 50 ms hands the rest of the run to `concurrency` threads, which overlap them."""
    names = threads_used(project, 0.06, 12)
    assert names[0] == "MainThread"
    assert all(name.startswith("oloproof-case-") for name in names[1:])
    assert len(set(names[1:])) > 1


def test_an_asynchronous_call_that_came_back_is_concluded_after_the_next_call_starts():
    # calls that come back together (a service's latency) are not each held up by the checking of
    # the others: the worker starts its next call, then the case is concluded on the loop's next turn
    import asyncio

    from oloproof_local_executor import LocalExecutor

    events = []

    class Work:
        is_async, concurrency = True, 2

        async def acall(self, i):
            events.append(("call", i))
            await asyncio.sleep(0.01)
            return i

        def conclude(self, i):
            events.append(("conclude", i))
            if i == 5:
                raise ValueError("a malformed artifact stops the run")
            return f"execution {i}"

    executor, got = LocalExecutor(), {}
    try:
        executor.run(Work(), list(range(4)), got.__setitem__)
        assert got == {i: f"execution {i}" for i in range(4)}
        assert events.index(("call", 2)) < events.index(("conclude", 0))
        assert events.index(("call", 3)) < events.index(("conclude", 1))
        events.clear()
        try:  # a conclusion's error stops the batch: no further call starts, the error is raised
            executor.run(Work(), list(range(10)), got.__setitem__)
        except ValueError as exc:
            assert "malformed" in str(exc)
        else:
            raise AssertionError("the conclusion's error was not raised")
        assert ("call", 9) not in events
    finally:
        executor.runner.close()
