"""The SDK side of a system: ``@system``, ``current_case()`` and the artifact recorder."""

from __future__ import annotations

import contextvars
import hashlib
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from attrs import frozen

from .errors import OloproofError
from .model import Case, Context, Retrieval

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

    def record(self, artifact_type: str, value: Any) -> None:
        """Record ``value`` as an artifact of ``artifact_type`` (validated when the case ends)."""
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
