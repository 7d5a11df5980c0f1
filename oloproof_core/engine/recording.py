"""The SDK side of a system: ``@system``, ``current_case()`` and the artifact recorder."""

from __future__ import annotations

import contextvars
import hashlib
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from attrs import frozen

from oloproof_core.model.errors import OloproofError
from oloproof_core.model.artifacts import Context, Retrieval
from oloproof_core.model.records import Case

_CURRENT: contextvars.ContextVar[Recorder] = contextvars.ContextVar("oloproof_current_case")


@frozen(kw_only=True)
class SystemInfo:
    """What ``@system`` declares: the name, the version and the artifact types it records."""

    name: str
    version: str
    records: tuple[str, ...] = ()


def system(*, name: str, version: str, records: Iterable[str] = ()) -> Callable:
    """Declare a function as a system under test; it is called with each case's ``input``.

    :param records: the artifact types it records through :func:`current_case`
        (``"retrieval/v1"``, ``"context/v1"``, ``"citations/v1"``); recording any other type
        stops the run.
    """

    def decorate(fn: Callable) -> Callable:
        fn.__oloproof_system__ = SystemInfo(name=name, version=version, records=tuple(records))
        return fn

    return decorate


@frozen(kw_only=True)
class RagSystemInfo:
    """What ``@rag_system`` declares; ``system.rag`` in oloproof.yaml overrides any of it."""

    name: str
    version: str
    depth: int | None = None
    top_k: int | None = None
    token_budget: int | None = None
    index_version: str | None = None


def rag_system(*, name: str, version: str, depth: int | None = None, top_k: int | None = None,
               token_budget: int | None = None, index_version: str | None = None) -> Callable:
    """Declare a class as a staged RAG system that Oloproof runs stage by stage.

    The class has ``retrieve(input, depth) -> Retrieval``, ``generate(input, context) -> output``
    and, when ``token_budget`` is set, ``count_tokens(passage) -> int``. Oloproof records the
    retrieval as given, keeps the first ``top_k`` candidates, drops what exceeds the budget, and
    passes the rest to ``generate``.
    """

    def decorate(cls: type) -> type:
        cls.__oloproof_rag_system__ = RagSystemInfo(name=name, version=version, depth=depth, top_k=top_k,
                                                    token_budget=token_budget, index_version=index_version)
        return cls

    return decorate


def import_object(target: str) -> Any:
    """Import ``module:attribute`` (dotted attributes allowed), with errors saying which part is wrong."""
    import importlib

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise OloproofError(f"{target!r} is not module:attribute", fix="write e.g. `app:run`")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise OloproofError(f"cannot import module {module_name!r}: {exc}",
                            fix=f"put {module_name}.py in the project directory or install it") from exc
    except Exception as exc:
        raise OloproofError(f"importing module {module_name!r} failed: {type(exc).__name__}: {exc}",
                            fix=f"fix {module_name}.py (--debug shows the traceback)") from exc
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise OloproofError(f"module {module_name!r} has no attribute {attr!r}",
                                fix=f"define {attr} in {module_name}.py or fix the name") from None
    return obj


def code_fingerprint(obj: Any) -> str:
    """sha256 of the source of one function or class (not its whole module)."""
    try:
        source = inspect.getsource(obj)
    except (OSError, TypeError):
        source = getattr(obj, "__qualname__", repr(obj))
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def source_fingerprint(obj: Any) -> str:
    """sha256 of the source file that defines ``obj``: editing the code changes it.

    The whole module is hashed, so a module-level constant (``EXPAND_QUERY = True``) counts.
    """
    module = inspect.getmodule(obj)
    try:
        source = inspect.getsource(module) if module is not None else inspect.getsource(obj)
    except (OSError, TypeError):
        source = getattr(obj, "__qualname__", repr(obj))
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


class Recorder:
    """Collects the artifacts a system records for the case being executed."""

    def __init__(self, case: Case):
        self.case = case
        self.items: list[tuple[str, Any]] = []
        self.sources: dict[int, str] = {}  # item index -> where the value came from, for messages
        #: the W3C ``traceparent`` of this case's trace when the run receives traces (``traces:``):
        #: a system sends it with its request (the ``http`` system does), else None
        self.traceparent: str | None = None
        #: why the case's artifacts are absent (``no_trace_spans``): its artifact criteria are missing
        self.unrecorded: str | None = None

    @property
    def trial(self) -> int:
        """Which of the run's ``trials:`` executions of the case this is: 0, 1, ... (0 without trials)."""
        return self.case.trial

    @property
    def history(self) -> list[dict]:
        """A conversation's earlier turns of this run, each ``{"input": ..., "output": ...}``, in
        order ([] for a first turn or a case that is not a conversation's; docs/conversations.md)."""
        return self.case.history_data()

    def record(self, artifact_type: str, value: Any, *, source: str | None = None) -> None:
        """Record ``value`` as an artifact of ``artifact_type`` (validated when the case ends).

        :param source: where the value came from (an HTTP response field, say), named in the
            error if it is malformed.
        """
        if source is not None:
            self.sources[len(self.items)] = source
        self.items.append((artifact_type, value))

    def retrieval(self, retrieval: Retrieval) -> None:
        """Record what the retriever returned, in its order (``retrieval/v1``)."""
        self.record("retrieval/v1", retrieval)

    def context(self, context: Context) -> None:
        """Record the context given to the model (``context/v1``)."""
        self.record("context/v1", context)

    def citations(self, ids: Iterable[str]) -> None:
        """Record the ids the answer cites (``citations/v1``)."""
        self.record("citations/v1", ids)


def takes_keyword(fn: Callable, name: str) -> bool:
    """Whether ``fn`` declares a parameter ``name`` a keyword can pass: a system's function or
    stage is given a conversation's ``history`` only when it names it (``**kwargs`` is not asking)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: called as before
        return False
    return any(p.name == name and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in parameters)


def current_case() -> Recorder:
    """The recorder of the case being executed, inside a system call."""
    try:
        return _CURRENT.get()
    except LookupError:
        raise OloproofError("current_case() was called outside a case",
                            fix="call it only inside a function that Oloproof runs as a system") from None


def call_with_recorder(fn: Callable[[Recorder], Any], case: Case) -> tuple[Any, Recorder]:
    """Run ``fn(recorder)`` with ``current_case()`` bound to a fresh recorder for ``case``."""
    recorder = Recorder(case)
    token = _CURRENT.set(recorder)
    try:
        return fn(recorder), recorder
    finally:
        _CURRENT.reset(token)
