"""Judging executions: every evaluator of the suite on each (case, execution) pair, through the
judgment cache, in this thread or, for judges that call out, a pool of threads."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import attrs

from oloproof_core.engine.conversations import last_turns
from oloproof_core.engine.suite import Suite
from oloproof_core.model.errors import EvaluationError
from oloproof_core.model.identity import digest
from oloproof_core.model.records import LAST_TURN, Case, Execution, Judgment, caches_judgments
from oloproof_core.model.untrusted import NotStorable, clean_text, storable
from oloproof_core.storage.cache_writer import DELAY, CacheWriter, Namespace

def judge(pairs: Sequence[tuple[Case, Execution | None]], specs: Sequence[Any], store: Any,
          concurrency: int, use_cache: bool = True, suite_specs: Sequence[Any] | None = None,
          ) -> tuple[list[dict], dict]:
    """Every evaluator's judgment of every (case, execution), from the judgment cache where it can.

    Returns one {criterion: Judgment} a pair, and the cache figures: ``[hits, misses]`` and the
    usage (calls, tokens, cost) the fresh judgments report, per criterion. Ctrl-C raises
    KeyboardInterrupt once every judgment already made is in the cache. ``suite_specs``: see
    :func:`judge_until_interrupted`.
    """
    judgments, figures, interrupted = judge_until_interrupted(pairs, specs, store, concurrency, use_cache,
                                                              suite_specs=suite_specs)
    if interrupted:
        raise KeyboardInterrupt
    return judgments, figures


def judgments_cached(spec: Any) -> bool:
    """Whether an evaluator's judgments go through the judgment cache: the suite's say
    (``EvaluatorSpec.cached``, from ``cache:``), else the evaluator's own (caches_judgments)."""
    said = getattr(spec, "cached", None)
    return caches_judgments(spec.evaluator) if said is None else said


def read_kinds(specs: Sequence[Any]) -> frozenset[str] | None:
    """The artifact types the evaluators read, when every one of them says (``reads``); None when
    one does not (it may read any)."""
    kinds: set[str] = set()
    for spec in specs:
        reads = getattr(spec.evaluator, "reads", None)
        if reads is None:
            return None
        kinds.update(reads)
    return frozenset(kinds)


def judged_view(execution: Execution, kinds: frozenset[str] | None) -> Execution:
    """What the evaluators are shown of an execution: when every evaluator of the suite says what it
    reads (``kinds``), only those artifact types, the ones :func:`pair_key` keeps, so no judgment
    rests on an artifact its cache key left out (an evaluator that reads a type it did not declare
    finds it absent, never a stale judgment); otherwise the whole execution."""
    if kinds is None or not execution.artifacts or all(kind in kinds for kind in execution.artifacts):
        return execution
    return attrs.evolve(execution, artifacts={k: v for k, v in execution.artifacts.items() if k in kinds})


def pair_key(case: Case, view: Execution, kinds: frozenset[str] | None, whole: bool) -> str:
    """The judgment-cache key of a (case, execution): the digest of the case and the record of
    what its evaluators are shown (``view``, :func:`judged_view`), so that a traced service's
    measured latencies (``usage/v1``) void no judgment that does not read them. A key whose view
    left artifacts out (not ``whole``) names the types it kept; any other is as it always was."""
    data = view.to_data()
    if not whole:
        data["judged_artifacts"] = sorted(kinds or ())
    return digest({"case": case.to_data(), "execution": data})


def judge_until_interrupted(pairs: Sequence[tuple[Case, Execution | None]], specs: Sequence[Any], store: Any,
                            concurrency: int, use_cache: bool = True, progress: Any = None,
                            writer: CacheWriter | Namespace | None = None, known: dict | None = None,
                            suite_specs: Sequence[Any] | None = None) -> tuple[list[dict], dict, bool]:
    """:func:`judge`, but Ctrl-C stops judging and returns what was judged: the judgments not
    made are missing (``interrupted``), and the third value says so.

    :param progress: told ``start("judgments", n)`` for the judgments not in the cache, ``step(judge_call)``
        as each is made (``judge_call``: an LLM judge's), and ``close()``.
    :param writer: the judgment cache's writer of a run that judges batch by batch (closed by the
        run); None: one of its own, closed before this returns.
    :param known: the rows this run wrote for the same pairs (judgment-cache key -> row), which the
        writer may not have committed yet: merged into the rows read, and added to.
    :param suite_specs: every evaluator of the suite (default ``specs``): what they read decides the
        judgment-cache key (:func:`pair_key`), so judging some of them (the relevance judge's two
        passes, ``oloproof judge validate``) reads the rows a run of the whole suite wrote.

    The judgment cache holds one row a (case, execution): its key the digest of the case and the
    execution's record (:func:`pair_key`), its value the judgments by evaluator identity digest. An evaluator
    whose identity is in the row is a hit; the others are judged and the row written again with
    their judgments added. The figures count one lookup per judgment, as before. An evaluator whose
    judgments are not cached (:func:`judgments_cached`) is judged on every run, in no row, and
    counted as a miss.
    """
    keys: dict[int, str] = {}  # pair -> its judgment-cache key: the digest of the case and its execution
    shown: dict[int, Execution] = {}  # pair -> what its evaluators are shown (judged_view)
    judgments: list[dict] = [{} for _ in pairs]
    todo: list[tuple[int, Any, str]] = []
    made: list[tuple[int, Any, None]] = []  # judgments of evaluators not cached (cached: false): made every run
    identities = {id(spec): digest(spec.identity) for spec in specs if judgments_cached(spec)}  # each evaluator's once per run
    kinds = read_kinds(specs if suite_specs is None else suite_specs)
    scoped = any(getattr(spec.evaluator, "scope", "turn") == "conversation" for spec in specs)
    last = last_turns([case for case, _ in pairs]) if scoped else ()  # scope: conversation judges these only
    # what each evaluator is, looked up once rather than once a case
    plan = [(spec, spec.evaluator.criterion, getattr(spec.evaluator, "exclude", None),
             scoped and getattr(spec.evaluator, "scope", "turn") == "conversation",
             bool(getattr(spec.evaluator, "reads", ())), identities.get(id(spec))) for spec in specs]
    for i, (case, execution) in enumerate(pairs):
        pair = None  # the digest of the case and its execution, made once for all evaluators
        for spec, criterion, exclude, once, reads, identity in plan:
            reason = exclude(case) if exclude is not None else None
            if once and i not in last:  # scope: conversation, on a turn before the last
                judgments[i][criterion] = Judgment.excluded(LAST_TURN)
            elif reason is not None:
                judgments[i][criterion] = Judgment.excluded(reason)
            elif execution is None:
                judgments[i][criterion] = Judgment.missing("interrupted")
            elif execution.missing is not None:
                judgments[i][criterion] = Judgment.missing(execution.missing)
            elif execution.unrecorded is not None and reads:
                judgments[i][criterion] = Judgment.missing(execution.unrecorded)
            else:
                view = shown.get(i)
                if view is None:
                    view = shown[i] = judged_view(execution, kinds)
                if identity is None:
                    made.append((i, spec, None))
                    continue
                if pair is None:
                    pair = keys[i] = pair_key(case, view, kinds, view is execution)
                todo.append((i, spec, identity))  # (pair, evaluator, its identity digest)
    # one row a pair: {evaluator identity digest: judgment}; read even without the cache, so that the
    # row written back keeps the judgments of evaluators this run does not re-judge
    cached = store.cache_get_many("judgment", list(dict.fromkeys(keys.values()))) if keys else {}
    known = {} if known is None else known
    rows: dict[int, dict] = {}  # pair -> its row as this run will write it
    pending: list[tuple[int, Any, str | None]] = []
    for i, spec, identity in todo:
        row = rows.get(i)
        if row is None:
            key = keys[i]
            found = cached.get(key)
            row = rows[i] = {**(found if isinstance(found, dict) else {}), **known.get(key, {})}
        value = row.get(identity) if use_cache else None
        if isinstance(value, dict):
            judgments[i][spec.evaluator.criterion] = Judgment.from_data(value)
        else:
            pending.append((i, spec, identity))
    pending += made

    def evaluate(item: tuple[int, Any, str | None]) -> Judgment:
        i, spec, _ = item
        try:
            judgment = spec.evaluator.evaluate(pairs[i][0], shown[i])
        except EvaluationError as exc:  # an expected per-case failure: missing with its reason
            judgment = Judgment.missing(str(exc))
        except Exception as exc:  # noqa: BLE001 - an evaluator failing on one case: that judgment is missing
            judgment = Judgment.missing(f"evaluator_error: {type(exc).__name__}: {exc}")
        return storable_judgment(judgment)

    # In-process evaluators run here; those that wait on a service (LLM judges declare
    # `concurrent = True`) run `concurrency` at a time.
    waits = {id(spec) for spec in specs if getattr(spec.evaluator, "concurrent", False)}
    slow = [t for t in pending if id(t[1]) in waits]
    fast = [t for t in pending if id(t[1]) not in waits] if waits else pending
    usage: dict[str, dict] = {}
    own = writer is None and bool(todo)
    if own:
        writer = CacheWriter(store, "judgment")  # every judgment paid for is committed as it arrives

    def keep(item: tuple[int, Any, str | None], judgment: Judgment, changed: dict | None = None) -> None:
        """A fresh judgment: the pair's, and in its row (written at once, or with ``changed``
        collected to be written together)."""
        i, spec, identity = item
        criterion = spec.evaluator.criterion
        judgments[i][criterion] = judgment
        if judgment.status != "missing" and identity is not None:
            row = rows[i]
            row[identity] = judgment.to_data()
            known[keys[i]] = row
            if changed is None:
                writer.put(keys[i], dict(row))  # a copy: the writer's thread reads it later
            else:
                changed[i] = row
        if progress is not None:
            progress.step(judge_call=getattr(spec.evaluator, "judge", False) is True)
        spent = judgment.detail.get("usage") if judgment.detail else None
        if spent:  # a judge of several calls (claims, relevance) counts them; any other made one
            total = usage.setdefault(criterion, {"calls": 0})
            if "calls" not in spent:
                total["calls"] += 1
            for name, value in spent.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    total[name] = total.get(name, 0) + value

    interrupted = False
    if progress is not None:
        progress.start("judgments", len(pending))
    try:
        held: dict = {}  # rows of in-process judgments, handed to the writer together (within DELAY / 2)
        since = time.monotonic()
        try:
            for item in fast:
                keep(item, evaluate(item), held)
                if held and (len(held) >= 500 or time.monotonic() - since > DELAY / 2):
                    writer.put_many([(keys[i], dict(row)) for i, row in held.items()])
                    held, since = {}, time.monotonic()
        finally:
            if held:
                writer.put_many([(keys[i], dict(row)) for i, row in held.items()])
        if slow:
            from concurrent.futures import ThreadPoolExecutor, as_completed  # judges that call out only

            pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="oloproof-judge")
            try:
                futures = {pool.submit(evaluate, item): item for item in slow}
                for future in as_completed(futures):  # kept as each returns, not in case order
                    keep(futures.pop(future), future.result())
            finally:  # on Ctrl-C the calls in flight are abandoned, not waited for
                pool.shutdown(wait=False, cancel_futures=True)
    except KeyboardInterrupt:
        interrupted = True
        for i, spec, _ in pending:
            judgments[i].setdefault(spec.evaluator.criterion, Judgment.missing("interrupted"))
    finally:
        if progress is not None:
            progress.close()
        if own:
            writer.close()
    # a judgment not cached counts as a miss: the run made it (the first run of a suite reads the same)
    figures: dict = {"judgment": [len(todo) + len(made) - len(pending), len(pending)]}
    if usage:
        figures["usage"] = usage
    return judgments, figures, interrupted


def storable_judgment(judgment: Any) -> Judgment:
    """The one boundary of what an evaluator returns (a judge's reply, its rationale, an error):
    a lone surrogate escaped and noted in ``detail["escaped"]``; a value no store keeps (a NaN
    score, a set in the detail, nesting past the bound) the judgment's missing reason
    (``invalid_judgment: ...``), never the run's error (model/untrusted.py)."""
    if not isinstance(judgment, Judgment):
        return Judgment.missing(f"invalid_judgment: the evaluator returned a {type(judgment).__name__}, "
                                "not a Judgment")
    value = judgment.value
    if (not judgment.detail and (judgment.reason is None or judgment.reason.isascii())
            and (value is None or type(value) is float and value - value == 0)):  # the common case: nothing to walk
        return judgment
    try:
        data, escaped = storable(judgment.to_data(), "$")
        if judgment.value is not None and not isinstance(judgment.value, (int, float)):
            raise NotStorable("$.value", f"a {type(judgment.value).__name__} is not a number")
    except NotStorable as exc:
        return Judgment.missing(f"invalid_judgment: {clean_text(str(exc))[0]}")
    if not escaped:
        return judgment
    detail = dict(data.get("detail", {}))
    detail["escaped"] = escaped
    return Judgment(status=data["status"], value=data.get("value"), reason=data.get("reason"), detail=detail)


class PassageCache:
    """The judgment cache as a judge that caches finer than a case sees it (the relevance judge:
    one grade per question and passage): ``get(key)`` (None when absent, or when not reading) and
    ``put(key, value)``."""

    def __init__(self, store: Any, read: bool = True):
        self.store, self.read = store, read

    def get(self, key: str) -> Any:
        return self.store.cache_get_many("judgment", [key]).get(key) if self.read else None

    def put(self, key: str, value: Any) -> None:
        self.store.cache_put_many("judgment", [(key, value)])


def judge_suite(pairs: Sequence[tuple[Case, Execution | None]], suite: Suite, store: Any, use_cache: bool = True,
                progress: Any = None, writer: CacheWriter | Namespace | None = None) -> tuple[list[dict], dict, bool]:
    """:func:`judge_until_interrupted` with the suite's evaluators, and with judged relevance
    (``relevance: {source: judge}``): the relevance judge first, then the retrieval metrics at k
    on its labels for the cases without ``expected.relevant`` (each judgment marked ``judged``)."""
    from oloproof_core.model.retrieval import AtKEvaluator, judged_case

    for spec in suite.evaluators:
        if hasattr(spec.evaluator, "bind_cache"):  # a judge's finer cache: none when its judgments are not cached
            cached = store is not None and judgments_cached(spec)
            spec.evaluator.bind_cache(PassageCache(store, read=use_cache) if cached else None)
    name = suite.relevance_judge
    if name is None:
        return judge_until_interrupted(pairs, suite.evaluators, store, suite.concurrency, use_cache, progress, writer)
    later = [s for s in suite.evaluators if isinstance(s.evaluator, AtKEvaluator)]
    first = [s for s in suite.evaluators if s not in later]
    known: dict = {}  # the rows the first pass wrote: a pair whose labels did not change has the same row
    judgments, figures, interrupted = judge_until_interrupted(pairs, first, store, suite.concurrency, use_cache,
                                                              progress, writer, known, suite.evaluators)
    derived, failed = [], {}
    for i, (case, execution) in enumerate(pairs):
        verdict = judgments[i].get(name)
        derived.append((judged_case(case, judgments[i], name), execution))
        if case.expected.get("relevant") is None and verdict is not None and verdict.status not in ("pass", "fail"):
            # the judge gave no labels: the metrics on them are missing, not excluded
            failed[i] = Judgment.missing(f"relevance_judge_{verdict.status}: {verdict.reason}")
    if later and not interrupted:
        more, extra, interrupted = judge_until_interrupted(derived, later, store, suite.concurrency, use_cache,
                                                           progress, writer, known, suite.evaluators)
        for i, row in enumerate(more):
            judgments[i].update({c: failed.get(i, j) if j.status == "excluded" else j for c, j in row.items()})
        hits, misses = extra["judgment"]
        figures["judgment"] = [figures["judgment"][0] + hits, figures["judgment"][1] + misses]
    else:
        for row in judgments:
            row.update({s.evaluator.criterion: Judgment.missing("interrupted") for s in later})
    return judgments, figures, interrupted


def judge_cases(suite: Suite, store: Any, executions: list[Execution | None], caches: dict,
                use_cache: bool = True, progress: Any = None) -> tuple[list[dict], bool]:
    """The judgments of a run's cases, and whether Ctrl-C stopped the judging; the cache figures
    go into ``caches``."""
    judgments, figures, interrupted = judge_suite(list(zip(suite.cases, executions)), suite, store, use_cache,
                                                  progress)
    caches.update(figures)
    return judgments, interrupted
