"""The ``ray`` executor: a run's cases execute on a Ray cluster (``pip install 'oloproof[ray]'``).

``executor: {type: ray, address: auto, replicas: 4, num_gpus: 1}`` in oloproof.yaml, or
``oloproof run --executor ray``. The project directory reaches the workers through Ray's runtime
environment (``working_dir``); each replica (an actor) builds the system once from the suite's
file, then executes batches of cases and sends the executions back. This process alone writes the
store and the caches; the system's stage caches are read on the workers through one reader on this
machine and written here. A replica whose process dies is restarted and its batch retried; a batch
that fails on every attempt leaves its cases missing with the reason. Ctrl-C cancels the remote
work; the run is stored interrupted and resumes from the cache like any other. A driver killed
outright leaves nothing running: Ray ends the actors it owns, and a cluster it started is ended
by a watchdog (watchdog.py) when Ray alone would leave its agents for a minute.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attrs import field, frozen

from oloproof import ConfigError, Execution, hookimpl

EXCLUDES = (".oloproof/", ".venv/", "venv/", ".git/", "__pycache__/", "*.pyc", "node_modules/")


@frozen(kw_only=True)
class Options:
    address: str | None = None  # auto, host:port, ray://host:10001; None: RAY_ADDRESS, else a new local cluster
    replicas: int = 2  # actors, each building the system once
    num_cpus: float = 1  # per replica
    num_gpus: float = 0  # per replica
    batch_size: int = 32  # cases sent to a replica at once
    max_retries: int = 3  # a batch whose replica died is retried this many times
    excludes: list[str] = field(factory=list)  # more project paths not shipped to the workers
    env_vars: list[str] = field(factory=list)  # names of this process's environment variables the workers get


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("executor ray needs Ray, which is not installed",
                          fix="pip install 'oloproof[ray]' (the same Ray version as the cluster's)") from None
    return ray


class StageReader:
    """The run's store opened read-only on the driver's machine; replicas read stage caches here."""

    def __init__(self, opener: Callable[[], Any]):
        self.store = opener()
        if hasattr(self.store, "read_only"):
            self.store.read_only = True

    def get(self, namespace: str, key: str) -> Any:
        return self.store.cache_get_many(f"stage:{namespace}", [key]).get(key)


class RemoteStageCache:
    """A replica's stage cache: reads through the driver-side reader, writes kept until the batch
    returns (the driver writes them)."""

    def __init__(self, reader: Any, read: bool):
        self.reader, self.read = reader, read
        self.puts: dict[tuple[str, str], Any] = {}

    def get(self, namespace: str, key: str) -> Any:
        if not self.read:
            return None
        if (namespace, key) in self.puts:
            return self.puts[(namespace, key)]
        if self.reader is None:
            return None
        import ray

        return ray.get(self.reader.get.remote(namespace, key))

    def put(self, namespace: str, key: str, value: Any) -> None:
        self.puts[(namespace, key)] = value

    def take(self) -> list[tuple[str, str, Any]]:
        puts, self.puts = self.puts, {}
        return [(ns, key, value) for (ns, key), value in puts.items()]


class Replica:
    """One copy of the system on a worker: built once, then batch after batch."""

    def __init__(self, recipe: Any, reader: Any):
        self.cache = RemoteStageCache(reader, recipe.stage_reads)
        self.work = recipe.build(Path(os.getcwd()), self.cache)  # the working_dir copy of the project
        self.loop = None
        self.counted: dict = {}

    def pid(self) -> int:
        return os.getpid()

    def run(self, cases: Sequence[Any]) -> tuple[list[dict], list, dict]:
        if self.work.is_async:
            import asyncio

            if self.loop is None:
                self.loop = asyncio.new_event_loop()
            executions = self.loop.run_until_complete(self._gather(cases))
        elif self.work.concurrency == 1 or len(cases) == 1:
            executions = [self.work.execute(case) for case in cases]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=min(self.work.concurrency, len(cases))) as pool:
                executions = list(pool.map(self.work.execute, cases))
        return [e.to_data() for e in executions], self.cache.take(), self._stage_delta()

    async def _gather(self, cases: Sequence[Any]) -> list:
        import asyncio

        gate = asyncio.Semaphore(self.work.concurrency)

        async def one(case: Any) -> Any:
            async with gate:
                return await self.work.aexecute(case)

        return await asyncio.gather(*(one(case) for case in cases))

    def _stage_delta(self) -> dict:
        counts = getattr(self.work.system, "stage_counts", None)
        if counts is None:
            return {}
        now = {stage: list(c) for stage, c in counts().items()}
        delta = {stage: [c[0] - self.counted.get(stage, [0, 0])[0], c[1] - self.counted.get(stage, [0, 0])[1]]
                 for stage, c in now.items()}
        self.counted = now
        return delta


class RayExecutor:
    def __init__(self, options: Options | None):
        self.options = options or Options()
        o = self.options
        for name in ("replicas", "batch_size"):
            if getattr(o, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(o, name)}", fix=f"write {name}: 2")
        if o.max_retries < 0 or o.num_cpus < 0 or o.num_gpus < 0:
            raise ConfigError("max_retries, num_cpus and num_gpus cannot be negative", fix="write 0 or more")
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            _ray()  # says how to install it
        self.actors: list = []  # the replicas and the reader, across a run's batches
        self.replicas: list = []
        self.started = False
        self.watchdog: Any = None  # ends the cluster this process started, should it be killed

    def _connect(self, ray: Any, project_dir: str) -> bool:
        """Join (or start) the cluster with the project as the working directory; True when this
        call initialised Ray (and so shuts it down after the run)."""
        if ray.is_initialized():
            return False
        import logging

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        runtime_env: dict = {"working_dir": project_dir, "excludes": [*EXCLUDES, *self.options.excludes]}
        absent = [name for name in self.options.env_vars if name not in os.environ]
        if absent:
            raise ConfigError(f"executor.env_vars names {absent[0]}, which is not set here", where="executor.env_vars",
                              fix=f"export {absent[0]}=... before the run, or remove it from env_vars")
        if self.options.env_vars:
            runtime_env["env_vars"] = {name: os.environ[name] for name in self.options.env_vars}
        ray.init(address=self.options.address, runtime_env=runtime_env, logging_level=logging.WARNING,
                 log_to_driver=False, configure_logging=False)
        self.watchdog = _watch_own_cluster()
        return True

    def _start(self, ray: Any, work: Any) -> None:
        """The replicas (and the stage-cache reader), made at a run's first batch and kept until
        :meth:`close`."""
        if self.actors:
            return
        o = self.options
        self.started = self._connect(ray, work.recipe.project_dir)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        reader = None
        if work.store_opener is not None and work.recipe.stage_reads:
            here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
            reader = ray.remote(num_cpus=0)(StageReader).options(scheduling_strategy=here).remote(work.store_opener)
            self.actors.append(reader)  # killed with the replicas
        remote = ray.remote(Replica).options(num_cpus=o.num_cpus, num_gpus=o.num_gpus, max_restarts=-1,
                                             max_task_retries=o.max_retries)
        self.replicas = [remote.remote(work.recipe, reader) for _ in range(o.replicas)]
        self.actors.extend(self.replicas)

    def close(self, work: Any) -> None:
        """After a run's last batch: the replicas stopped, and Ray shut down if the run started it."""
        if not self.actors and not self.started:
            return
        ray = _ray()
        for actor in self.actors:
            ray.kill(actor)
        self.actors, self.replicas = [], []
        if self.started:
            _unwatch(self.watchdog)
            self.watchdog = None
            ray.shutdown()
            self.started = False

    def run(self, work: Any, cases: Sequence[Any], done: Callable[[int, Any], None]) -> None:
        """One batch of a run's cases (a run may call it many times, then :meth:`close`)."""
        if not cases:
            return
        ray = _ray()
        o = self.options
        in_flight: dict = {}
        try:
            self._start(ray, work)
            actors = self.replicas
            batches = deque(list(range(k, min(k + o.batch_size, len(cases))))
                            for k in range(0, len(cases), o.batch_size))
            load = {i: 0 for i in range(len(actors))}

            def submit() -> None:
                for a in sorted(load, key=load.get):
                    while batches and load[a] < 2:  # two batches per replica: one running, one queued
                        batch = batches.popleft()
                        in_flight[actors[a].run.remote([cases[i] for i in batch])] = (a, batch)
                        load[a] += 1

            submit()
            while in_flight:
                ready, _ = ray.wait(list(in_flight), num_returns=1)
                for ref in ready:
                    a, batch = in_flight.pop(ref)
                    load[a] -= 1
                    try:
                        executions, puts, stages = ray.get(ref)
                    except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError,
                            ray.exceptions.WorkerCrashedError) as exc:
                        reason = f"error: ray worker lost after {o.max_retries} retries: {type(exc).__name__}"
                        for i in batch:
                            done(i, Execution(missing=reason))
                        continue
                    except ray.exceptions.RayTaskError as exc:  # the run's own errors (a malformed artifact)
                        raise exc.as_instanceof_cause() from None
                    for namespace, key, value in puts:
                        work.stage_cache.put(namespace, key, value)
                    work.count_stages(stages)
                    for i, data in zip(batch, executions):
                        done(i, Execution.from_data(data))
                submit()
        except KeyboardInterrupt:
            for ref in in_flight:
                ray.cancel(ref)
            raise


def _watch_own_cluster() -> Any:
    """When ``ray.init`` started a cluster in this process (the raylet is our child), a watchdog
    that ends that cluster's processes should this process be killed (watchdog.py says why Ray
    alone leaves its agents for a minute). None on a cluster started elsewhere: there the job's
    actors are owned by this process, and Ray ends them when it dies (tests/test_ray_executor.py)."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        return None
    if "raylet" not in _children(os.getpid()):
        return None
    return subprocess.Popen([sys.executable, str(Path(__file__).with_name("watchdog.py")), str(os.getpid())],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # not in the driver's process group: a group signal spares it


def _children(pid: int) -> set[str]:
    """The names (``comm``) of the processes whose parent is ``pid``, from /proc."""
    names = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                head, _, tail = (entry / "stat").read_bytes().rpartition(b")")
                if int(tail.split()[1]) == pid:
                    names.add(head.partition(b"(")[2].decode("utf-8", "replace"))
            except (OSError, IndexError, ValueError):
                pass
    return names


def _unwatch(watchdog: Any) -> None:
    """The driver is finishing normally: the watchdog leaves, and Ray shuts its cluster down."""
    if watchdog is None:
        return
    import contextlib
    import subprocess

    with contextlib.suppress(OSError, ValueError):
        watchdog.stdin.write(b"exit")
        watchdog.stdin.close()
    try:
        watchdog.wait(timeout=5)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


@hookimpl
def oloproof_register_executors(registry):
    registry.add("ray", RayExecutor, options=Options)
