"""The work of one case: call the system with a recorder, turn its output into an Execution.

:class:`CaseWork` is what every executor calls, in this process or a worker's;
:class:`WorkRecipe` is how a worker builds the same work from the project's files.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen

from oloproof_core.hooks.manager import Plugins
from oloproof_core.model.errors import ArtifactError, CaseMissing, ConfigError
from oloproof_core.model.records import Case, Execution
from oloproof_core.model.untrusted import NotStorable, clean_text, storable
from oloproof_core.engine.recording import Recorder, call_with_recorder

def to_execution(output: Any, recorder: Recorder, case: Case, system: Any, plugins: Plugins,
                 seconds: float) -> Execution:
    """Validate what the system recorded; a malformed or undeclared artifact stops the run."""
    if not recorder.items:  # most systems record nothing
        return Execution(output=output, seconds=seconds, unrecorded=recorder.unrecorded)
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
    return Execution(output=output, artifacts={k: tuple(v) for k, v in artifacts.items()}, seconds=seconds,
                     unrecorded=recorder.unrecorded)


def storable_execution(execution: Execution, escaped: list[str]) -> Execution:
    """An execution whose output is already storable (:func:`storable`), its artifacts and missing
    reason made so too: a lone surrogate escaped and noted, anything no store keeps the case's
    missing reason (``invalid_output: PATH: PROBLEM``), never the run's error."""
    noted = list(escaped)
    if execution.missing is not None:
        reason, was = clean_text(execution.missing)
        return attrs.evolve(execution, missing=reason, escaped=("$.missing",) if was else ())
    if execution.artifacts:
        try:
            artifacts, more = storable({k: list(v) for k, v in execution.artifacts.items()}, "$.artifacts")
        except NotStorable as exc:
            return Execution(missing=f"invalid_output: {clean_text(str(exc))[0]}", seconds=execution.seconds)
        if more:
            noted += more
            execution = attrs.evolve(execution, artifacts={k: tuple(v) for k, v in artifacts.items()})
    return attrs.evolve(execution, escaped=tuple(noted)) if noted else execution


FRAMES = 20  # the innermost frames of the project's code that an execution keeps


def project_frames(exc: BaseException, project_dir: str | Path | None) -> tuple[dict, ...]:
    """The frames of ``exc``'s traceback in the project's own files (under ``project_dir``; without
    it, in no installed location and not Oloproof's), innermost last, each its file (relative to
    the project), line, function and source line: what a user needs to find their bug, and none
    of Oloproof's or a library's frames."""
    import traceback

    from oloproof_core.engine.installed import _installed_dirs

    root = os.path.realpath(project_dir) + os.sep if project_dir else None
    ours = tuple(os.path.dirname(os.path.dirname(os.path.realpath(m.__file__))) + os.sep
                 for m in (sys.modules.get("oloproof_core"),) if m is not None and m.__file__)
    installed = _installed_dirs()
    frames = []
    try:
        extracted = traceback.extract_tb(exc.__traceback__)
    except Exception:  # noqa: BLE001 - a traceback that cannot be read: the reason stands alone
        return ()
    for frame in extracted:
        real = os.path.realpath(frame.filename)
        if root is not None:
            if not real.startswith(root) or real.startswith(installed):
                continue
            shown = real[len(root):].replace(os.sep, "/")
        else:
            if frame.filename.startswith("<") or real.startswith(installed) or real.startswith(ours):
                continue
            shown = frame.filename
        frames.append({"file": shown, "line": frame.lineno, "function": frame.name, "code": (frame.line or "").strip()})
    return tuple(frames[-FRAMES:])


class CaseWork:
    """What one run does with each case: call the system, check what it returns and records.

    Executors (the builtin ``local`` one, ``ray``) decide where, and how many at once: they call
    :meth:`execute` (or :meth:`aexecute` when :attr:`is_async`) per case. A system error is the
    case's missing reason; a malformed artifact raises and stops the run. :attr:`recipe` builds
    the same work in another process (:meth:`WorkRecipe.build`).
    """

    locate = True  # a malformed artifact's error names the case (diagnose's re-executions: not)

    def __init__(self, system: Any, plugins: Plugins, concurrency: int, recipe: WorkRecipe | None = None,
                 store: Any = None, stage_cache: Any = None):
        self.system, self.plugins, self.recipe = system, plugins, recipe
        # a system may cap its own concurrency (an HTTP service's limit, say)
        self.concurrency = min(concurrency, getattr(system, "concurrency", None) or concurrency)
        spread = getattr(system, "spread", None)  # a traced system: more cases in flight than calls (traces.md)
        if spread is not None:
            self.concurrency = spread(self.concurrency)
        self.is_async = hasattr(system, "aexecute")
        #: the run's stage caches, for an executor that brings back what remote replicas stored
        self.stage_cache = stage_cache
        #: a picklable callable opening the run's store again on this machine, or None
        self.store_opener = getattr(store, "reopen", None)
        self.remote_stages: dict[str, list[int]] = {}  # stage -> [hits, misses] counted on remote replicas

    def count_stages(self, counts: dict) -> None:
        """Add a remote replica's stage-cache hits and misses to the run's figures."""
        for stage, (hits, misses) in counts.items():
            total = self.remote_stages.setdefault(stage, [0, 0])
            total[0] += hits
            total[1] += misses

    def _finish(self, case: Case, output: Any, recorder: Recorder, start: float) -> Execution:
        try:  # the one boundary of what a system returns (model/untrusted.py)
            output, escaped = storable(output, "$.output")
        except NotStorable as exc:
            return Execution(missing=f"invalid_output: {clean_text(str(exc))[0]}",
                             seconds=time.perf_counter() - start)
        return storable_execution(to_execution(output, recorder, case, self.system, self.plugins,
                                               time.perf_counter() - start), escaped)

    def _failed(self, case: Case, exc: Exception, start: float) -> Execution:
        """A system's exception: the case's missing reason, or (a malformed artifact, a config
        error) raised again to stop the run, located at the case when the work says so (``locate``)."""
        if isinstance(exc, ArtifactError) and self.locate:  # raised by a record type's validator inside the system
            raise ArtifactError(f"case {case.id!r}: {exc.problem}", fix=exc.fix) from None
        if isinstance(exc, (ArtifactError, ConfigError)):
            raise exc
        try:
            reason = exc.reason if isinstance(exc, CaseMissing) else f"error: {type(exc).__name__}: {exc}"
        except Exception as failed:  # noqa: BLE001 - an exception whose own __str__ fails
            reason = f"error: {type(exc).__name__} (its message could not be read: {type(failed).__name__})"
        frames = () if isinstance(exc, CaseMissing) else project_frames(
            exc, self.recipe.project_dir if self.recipe is not None else None)
        return storable_execution(Execution(missing=str(reason), seconds=time.perf_counter() - start,
                                            traceback=frames), [])

    def execute(self, case: Case) -> Execution:
        start = time.perf_counter()
        try:
            output, recorder = call_with_recorder(lambda r: self.system.execute(case, r), case)
        except Exception as exc:  # noqa: BLE001 - the system failed on this case: it is missing, the run goes on
            return self._failed(case, exc, start)
        return self._finish(case, output, recorder, start)

    async def aexecute(self, case: Case) -> Execution:
        return self.conclude(await self.acall(case))

    async def acall(self, case: Case) -> tuple:
        """The system's call alone, :meth:`aexecute`'s first half: what :meth:`conclude` makes the
        case's execution of. An executor may conclude a case after starting the next call, so
        that checking what came back never delays a call (the local executor does)."""
        recorder = Recorder(case)
        start = time.perf_counter()
        try:
            return case, await self.system.aexecute(case, recorder), None, recorder, start
        except Exception as exc:  # noqa: BLE001 - the system failed on this case: it is missing
            return case, None, exc, recorder, start

    def conclude(self, called: tuple) -> Execution:
        """The execution of what :meth:`acall` returned: a system's exception is the case's missing
        reason (or, a malformed artifact, raised to stop the run)."""
        case, output, exc, recorder, start = called
        if exc is not None:
            return self._failed(case, exc, start)
        return self._finish(case, output, recorder, start)

    async def aclose(self) -> None:
        closer = getattr(self.system, "aclose", None)
        if closer is not None:
            await closer()


class InterventionWork(CaseWork):
    """Diagnose's work: re-execute a case under an intervention (``role`` ``apply``) or its control
    (``control``). The items are (case, the parent run's record of it). An intervention calls the
    system's stages directly; on an asynchronous system (an http service) they are coroutines,
    awaited on the executor's event loop."""

    locate = False

    def __init__(self, system: Any, plugins: Plugins, concurrency: int, intervention: Any, role: str,
                 recipe: WorkRecipe | None = None, store: Any = None, stage_cache: Any = None):
        super().__init__(system, plugins, concurrency, recipe, store, stage_cache)
        self.call = getattr(intervention, role)
        self.is_async = hasattr(system, "aexecute")

    def execute(self, item: tuple[Case, dict]) -> Execution:
        case, record = item
        start = time.perf_counter()
        try:
            output, recorder = call_with_recorder(lambda r: self.call(self.system, case, record, r), case)
        except Exception as exc:  # noqa: BLE001 - a re-execution failing: that case is missing
            return self._failed(case, exc, start)
        return self._finish(case, output, recorder, start)

    async def acall(self, item: tuple[Case, dict]) -> tuple:
        case, record = item
        recorder = Recorder(case)
        start = time.perf_counter()
        try:
            output = self.call(self.system, case, record, recorder)
            if inspect.isawaitable(output):
                output = await output
        except Exception as exc:  # noqa: BLE001 - a re-execution failing: that case is missing
            return case, None, exc, recorder, start
        return case, output, None, recorder, start


def make_intervention(plugins: Plugins, name: str, options: dict) -> Any:
    """The intervention ``name`` built by its plugin from plain ``options`` (``--top-k`` etc.)."""
    from oloproof_core.config.documents import structure

    entry = plugins.interventions.get(name)
    if entry.options is None:
        return entry.factory(None)
    return entry.factory(structure(None, options, entry.options, (), what=f"intervention {name!r}"))


@frozen(kw_only=True)
class WorkRecipe:
    """How to build a run's :class:`CaseWork` in another process (an executor's worker): the
    suite's file, read in the worker's copy of the project, and the plugins it disabled."""

    project_dir: str  # the project directory of the run (the one executors ship to their workers)
    config_name: str  # the suite's file, relative to the project directory
    disabled: tuple[str, ...] = ()
    stage_reads: bool = True  # False: --no-cache / --refresh (stage caches written, never read)
    # diagnose: (intervention name, its plain options, "apply" or "control"); None: a run's executions
    intervention: tuple | None = None

    def build(self, project_dir: Path, stage_cache: Any = None) -> CaseWork:
        """The work in ``project_dir`` (the worker's copy of the project); ``stage_cache``: what
        the system's own stage caches read and write there (a StageCache-like object, or None)."""
        from oloproof_core.hooks.manager import make_plugin_manager
        from oloproof_core.engine.system import load_skeleton, load_system

        config_path = Path(project_dir) / self.config_name
        doc, skeleton = load_skeleton(config_path)
        plugins = Plugins(make_plugin_manager(disabled=[*self.disabled, *skeleton.disable_plugins]))
        if str(project_dir) not in sys.path:
            sys.path.append(str(project_dir))
        system, _ = load_system(doc, skeleton.system, plugins, Path(project_dir), stage_cache=stage_cache,
                                traces=skeleton.traces)
        if self.intervention is not None:
            name, options, role = self.intervention
            return InterventionWork(system, plugins, skeleton.concurrency, make_intervention(plugins, name, options),
                                    role, self)
        return CaseWork(system, plugins, skeleton.concurrency, self)
