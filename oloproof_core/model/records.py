"""The data model: frozen records and the protocols plugins implement.

Serialisation lives in the stores and in ``config.py``; this module only defines values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from attrs import field, frozen

from oloproof_core.model.errors import ConfigError

JSON = Any  # a value json.dumps accepts


def as_tuple(value: Any) -> tuple:
    return tuple(value)


# -- the case and its results -------------------------------------------------------------


@frozen(kw_only=True)
class Case:
    """One case of a suite: ``input`` goes to the system, ``expected`` to the evaluators."""

    id: str
    input: Mapping[str, JSON]
    expected: Mapping[str, JSON] = field(factory=dict)
    metadata: Mapping[str, JSON] = field(factory=dict)
    source: str = ""  # "cases.jsonl:7", for messages
    trial: int = 0  # which of a run's `trials:` executions this is (0 without trials); not part of the record
    # a conversation's turn case: the earlier turns of this run, each {"input": ..., "output": ...},
    # filled when it executes (docs/conversations.md); () for every other case
    history: tuple[Mapping[str, JSON], ...] = field(default=(), converter=as_tuple)

    def history_data(self) -> list[dict]:
        """The earlier turns as plain data, each ``{"input": ..., "output": ...}`` ([] for a first
        turn or a case that is not a conversation's): what a system, a record and a key are given."""
        return [dict(entry) for entry in self.history]

    def to_data(self) -> dict:
        data = {"id": self.id, "input": self.input, "expected": self.expected, "metadata": self.metadata}
        if self.history:  # only a later turn's: the record of a case without history is unchanged
            data["history"] = self.history_data()
        return data


@frozen(kw_only=True)
class Execution:
    """What one execution of the system produced for a case.

    ``artifacts`` maps an artifact type (``retrieval/v1``) to the plain records of that type, in
    the order they were recorded. ``missing`` is set, with a reason, when the case produced no
    output (an error, a timeout, an interrupt).
    """

    output: JSON = None
    artifacts: Mapping[str, tuple[Mapping[str, JSON], ...]] = field(factory=dict)
    missing: str | None = None
    seconds: float = 0.0
    stages: Mapping[str, str] = field(factory=dict)  # stage name -> "hit" | "miss", for staged systems
    escaped: tuple[str, ...] = ()  # JSON paths whose lone surrogates were escaped (model/untrusted.py)
    # why the artifacts are absent though there is an output (``no_trace_spans``): every criterion
    # that reads an artifact is missing with this reason
    unrecorded: str | None = None
    # where the project's own code raised, when the system raised (its frames only, innermost
    # last): ``{"file": "app.py", "line": 12, "function": "run", "code": "return PLANETS[q]"}``
    traceback: tuple[Mapping[str, JSON], ...] = ()

    def to_data(self) -> dict:
        data: dict = {"output": self.output,
                      "artifacts": {k: list(v) for k, v in self.artifacts.items()} if self.artifacts else {}}
        if self.missing is not None:
            data["missing"] = self.missing
        if self.traceback:
            data["traceback"] = [dict(frame) for frame in self.traceback]
        if self.escaped:
            data["escaped"] = list(self.escaped)
        if self.unrecorded is not None:
            data["unrecorded"] = self.unrecorded
        return data

    @classmethod
    def from_data(cls, data: Mapping) -> Execution:
        artifacts = {k: tuple(v) for k, v in data.get("artifacts", {}).items()}
        return cls(output=data.get("output"), artifacts=artifacts, missing=data.get("missing"),
                   escaped=tuple(data.get("escaped", ())), unrecorded=data.get("unrecorded"),
                   traceback=tuple(data.get("traceback", ())))


Status = Literal["pass", "fail", "score", "excluded", "missing"]


# the reason a conversation criterion gives on every turn but the one it judges (docs/conversations.md):
# excluded by design, never listed among a criterion's exclusions
LAST_TURN = "judged_on_last_turn"


@frozen(kw_only=True)
class Judgment:
    """One evaluator's verdict on one case.

    ``pass``/``fail`` carry 1.0/0.0 (a proportion metric), ``score`` a value in the evaluator's
    range (a mean metric); ``excluded`` means the evaluator does not apply (with a reason) and
    ``missing`` that there was nothing to judge (with a reason).
    """

    status: Status
    value: float | None = None
    reason: str | None = None
    detail: Mapping[str, JSON] = field(factory=dict)

    @classmethod
    def passed(cls, reason: str | None = None, **detail: JSON) -> Judgment:
        if reason is None and not detail and cls is Judgment:  # a value like any other: one for every case
            return _PASSED
        return cls(status="pass", value=1.0, reason=reason, detail=detail)

    @classmethod
    def failed(cls, reason: str | None = None, **detail: JSON) -> Judgment:
        if reason is None and not detail and cls is Judgment:
            return _FAILED
        return cls(status="fail", value=0.0, reason=reason, detail=detail)

    @classmethod
    def of(cls, ok: bool, reason: str | None = None, **detail: JSON) -> Judgment:
        return cls.passed(reason, **detail) if ok else cls.failed(reason, **detail)

    @classmethod
    def score(cls, value: float, **detail: JSON) -> Judgment:
        return cls(status="score", value=float(value), detail=detail)

    @classmethod
    def excluded(cls, reason: str) -> Judgment:
        return cls(status="excluded", reason=reason)

    @classmethod
    def missing(cls, reason: str) -> Judgment:
        return cls(status="missing", reason=reason)

    @property
    def observed(self) -> bool:
        return self.status in ("pass", "fail", "score")

    def to_data(self) -> dict:
        data: dict = {"status": self.status}
        if self.value is not None:
            data["value"] = self.value
        if self.reason is not None:
            data["reason"] = self.reason
        if self.detail:
            data["detail"] = dict(self.detail)
        return data

    @classmethod
    def from_data(cls, data: Mapping) -> Judgment:
        return cls(status=data["status"], value=data.get("value"), reason=data.get("reason"),
                   detail=data.get("detail", {}))


_PASSED, _FAILED = Judgment(status="pass", value=1.0), Judgment(status="fail", value=0.0)


def tally(judgments: Sequence[Judgment]) -> tuple[Sequence[float], int, int]:
    """The observed values of ``judgments``, and how many are missing and excluded."""
    if isinstance(judgments, Column):  # counted as the run streamed past: no pass over the cases
        return judgments.values, judgments.missing, judgments.excluded
    values = [j.value for j in judgments if j.observed]
    missing = sum(1 for j in judgments if j.status == "missing")
    return values, missing, len(judgments) - len(values) - missing


class Values(Sequence[float]):
    """Observed values in case order: what a metric's interval reads from a :class:`Column`, a byte
    each while every value is 0 or 1 (``bytearray``), else eight (``array('d')``). ``values + [0.0]
    * n`` (the gate's worst case) adds to it without copying it; numpy reads it as an array."""

    def __init__(self, data: Any, extra: Sequence[float] = ()):
        self.data, self.extra = data, list(extra)

    def __len__(self) -> int:
        return len(self.data) + len(self.extra)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        if i < 0:
            i += len(self)
        return float(self.data[i]) if i < len(self.data) else self.extra[i - len(self.data)]

    def __iter__(self) -> Any:
        yield from (map(float, self.data) if isinstance(self.data, bytearray) else self.data)
        yield from self.extra

    def __add__(self, other: Sequence[float]) -> Values:
        return Values(self.data, [*self.extra, *other])

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        kind = np.uint8 if isinstance(self.data, bytearray) else float
        data = np.frombuffer(self.data, dtype=kind).astype(float) if len(self.data) else np.zeros(0)
        joined = np.concatenate([data, np.asarray(self.extra, dtype=float)]) if self.extra else data.copy()
        return joined if dtype is None else joined.astype(dtype)


_CODES = ("pass", "fail", "score", "excluded", "missing")


class Column(Sequence[Judgment]):
    """One criterion's judgments of a run, in case order, kept compactly as the run streams past: a
    status byte per case and the observed values (:class:`Values`); reasons and details are in the
    stored records, not here. Metrics read it as any sequence of judgments (``tally`` reads its
    counts directly)."""

    def __init__(self) -> None:
        self.codes = bytearray()
        self.data: Any = bytearray()  # the observed values, a byte each while all are 0 or 1
        self.missing = self.excluded = self.failures = 0

    def append(self, judgment: Judgment) -> None:
        status = judgment.status
        self.codes.append(_CODES.index(status))
        if status in ("pass", "fail", "score"):
            value = float(judgment.value)
            if isinstance(self.data, bytearray) and value not in (0.0, 1.0):
                from array import array

                self.data = array("d", map(float, self.data))  # a value that is neither: eight bytes each from here
            self.data.append(int(value) if isinstance(self.data, bytearray) else value)
            self.failures += status == "fail"
        elif status == "missing":
            self.missing += 1
        else:
            self.excluded += 1

    @property
    def values(self) -> Values:
        return Values(self.data)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        return list(self)[i] if i < 0 else self._judgment(i, None)

    def _judgment(self, i: int, value: float | None) -> Judgment:
        status = _CODES[self.codes[i]]
        if status in ("pass", "fail", "score"):
            if value is None:  # the position among the observed values
                value = self.data[sum(1 for c in self.codes[:i] if c < 3)]
            return Judgment(status=status, value=float(value))
        return Judgment(status=status)

    def __iter__(self) -> Any:
        values = iter(self.data)
        for i, code in enumerate(self.codes):
            yield self._judgment(i, next(values) if code < 3 else None)


@frozen(kw_only=True)
class Summary:
    """A metric over the cases of a run (or a slice): the estimate, its interval and the counts."""

    metric: str  # the metric plugin that made it: "proportion", "mean"
    value: float | None
    low: float | None
    high: float | None
    observed: int
    missing: int
    excluded: int
    successes: int | None = None  # proportions only
    cells: tuple[str, str, str] = ("", "", "")  # value, interval, counts as printed


# -- the RAG record types ------------------------------------------------------------------


# -- the protocols plugins implement ------------------------------------------------------


@runtime_checkable
class System(Protocol):
    """A system under test. ``identity`` keys the execution cache; ``execute`` runs one case.

    A system may define ``async def aexecute(case, recorder)`` instead of ``execute``; the runner
    then drives it on an event loop, at most ``concurrency`` cases at once.

    A system whose ``identity`` cannot see what produces its answers (a remote service) sets
    ``opaque = True``: its cached executions are then reused only when the suite says
    ``system.cache: reuse``. A system that loads user code puts :func:`oloproof.project_fingerprint`
    in its identity instead.
    """

    name: str
    version: str  # recorded version: declared version + code fingerprint
    records: frozenset[str]
    identity: Mapping[str, JSON]


class Evaluator(Protocol):
    """Judges one case: ``criterion`` names it, ``metric`` names the metric that summarises it."""

    criterion: str
    metric: str

    def evaluate(self, case: Case, execution: Execution) -> Judgment: ...


def caches_judgments(evaluator: Any) -> bool:
    """Whether an evaluator's own say (``cached``, absent: yes) puts its judgments in the judgment
    cache; ``cached = False``: in-process and deterministic, made again for less than a cache row."""
    return getattr(evaluator, "cached", True) is not False


class Metric(Protocol):
    """Summarises the judgments of one criterion with an interval at a confidence level."""

    def summarize(self, judgments: Sequence[Judgment], confidence: float) -> Summary: ...

    def interval(self, values: Sequence[float], confidence: float) -> tuple[float, float]: ...


class Slice(Protocol):
    """Groups cases for exploratory tables: ``key`` returns the group, or None to leave it out."""

    name: str

    def key(self, case: Case, execution: Execution) -> str | None: ...


@frozen(kw_only=True)
class SystemContext:
    """What a system factory is told besides its options: the declared name and version."""

    name: str
    version: str
    project_dir: Any  # pathlib.Path of the project (the config file's directory)
    cache: Any = None  # a StageCache: get(namespace, key) / put(namespace, key, value), or None


class StageCache:
    """A system's own caches (``retrieve``, ``generate``) kept in the project's store."""

    def __init__(self, store: Any, read: bool = True):
        self.store, self.read = store, read  # read=False: `oloproof run --no-cache` (write only)

    def get(self, namespace: str, key: str) -> Any:
        if not self.read:
            return None
        return self.store.cache_get_many(f"stage:{namespace}", [key]).get(key)

    def put(self, namespace: str, key: str, value: Any) -> None:
        self.store.cache_put_many(f"stage:{namespace}", [(key, value)])


def select(value: Any, path: str | None) -> Any:
    """``value`` at a dotted path of nested objects (``evidence.retrieval``), or None if absent.

    An integer part indexes a list (``sources.0.id``); an empty or None path is the value itself.
    """
    if path and "." not in path and type(value) is dict:  # one key of an object: most paths, every case
        found = value.get(path)
        if found is not None or path in value:
            return found
        if not path.isdigit():
            return None
    for part in path.split(".") if path else ():
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def acceptable_texts(case: Any, expected_field: str, evaluator: str) -> list[str] | None:
    """The case's acceptable answers for a text evaluator: ``expected.<field>`` as a list of strings
    (a string is a list of one), None when absent; anything else is a ConfigError at the case's line."""
    want = select(case.expected, expected_field)
    if want is None:
        return None
    if isinstance(want, str):
        return [want]
    if isinstance(want, list) and want and all(isinstance(w, str) for w in want):
        return list(want)
    where = f"{case.source}: $.expected.{expected_field}" if case.source else f"$.expected.{expected_field}"
    raise ConfigError(f"{evaluator} compares text, and the expected value is {want!r}", where=where,
                      fix=f'write a string, or a list of acceptable strings: "{expected_field}": ["...", "..."]')
