"""The runner: cases -> system (execution.py) -> evaluators -> metrics -> gate -> store.

Results are always reported in case order, whatever the concurrency; a sequential run's
(``sequential.py``) in the order its cases ran.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from attrs import field, frozen

from .errors import EvaluationError, ExitCode
from .execution import execute_cases
from .gate import Decision, decide_policy, gate, policy_data
from .identity import digest
from .model import Case, Execution, Judgment, Summary
from .plugins import Plugins
from .suite import Suite
from .writer import CacheWriter

@frozen(kw_only=True)
class CaseResult:
    case: Case
    execution: Execution | None  # None: the run was interrupted before this case finished
    judgments: dict  # criterion -> Judgment
    slices: dict = field(factory=dict)  # slice name -> group (None: not in any group)


@frozen(kw_only=True)
class RunOutcome:
    run_id: str
    header: dict
    results: list[CaseResult]
    summaries: dict  # criterion -> Summary
    slices: list[tuple[str, str, str, Summary | None]]  # slice, group, criterion, summary
    decisions: list[Decision]
    gate: str | None
    exit_code: ExitCode
    state: str  # "DECIDED/COMPLETE", ...
    caches: dict = field(factory=dict)
    empty_slices: list = field(factory=list)  # slices no case had a group in (a misspelt field, say)


def new_run_id() -> str:
    from ulid import ULID

    return f"run_{ULID()}"


def judge(pairs: Sequence[tuple[Case, Execution | None]], specs: Sequence[Any], store: Any,
          concurrency: int, use_cache: bool = True) -> tuple[list[dict], dict]:
    """Every evaluator's judgment of every (case, execution), from the judgment cache where it can.

    Returns one {criterion: Judgment} a pair, and the cache figures: ``[hits, misses]`` and the
    usage (calls, tokens, cost) the fresh judgments report, per criterion. Ctrl-C raises
    KeyboardInterrupt once every judgment already made is in the cache.
    """
    judgments, figures, interrupted = judge_until_interrupted(pairs, specs, store, concurrency, use_cache)
    if interrupted:
        raise KeyboardInterrupt
    return judgments, figures


def judge_until_interrupted(pairs: Sequence[tuple[Case, Execution | None]], specs: Sequence[Any], store: Any,
                            concurrency: int, use_cache: bool = True) -> tuple[list[dict], dict, bool]:
    """:func:`judge`, but Ctrl-C stops judging and returns what was judged: the judgments not
    made are missing (``interrupted``), and the third value says so."""
    judgments: list[dict] = [{} for _ in pairs]
    todo: list[tuple[int, Any, str]] = []
    for i, (case, execution) in enumerate(pairs):
        case_data, record = case.to_data(), None
        for spec in specs:
            evaluator = spec.evaluator
            exclude = getattr(evaluator, "exclude", None)
            reason = exclude(case) if exclude is not None else None
            if reason is not None:
                judgments[i][evaluator.criterion] = Judgment.excluded(reason)
            elif execution is None:
                judgments[i][evaluator.criterion] = Judgment.missing("interrupted")
            elif execution.missing is not None:
                judgments[i][evaluator.criterion] = Judgment.missing(execution.missing)
            else:
                if record is None:
                    record = execution.to_data()
                todo.append((i, spec, digest({"evaluator": spec.identity, "case": case_data, "execution": record})))
    cached = store.cache_get_many("judgment", [key for _, _, key in todo]) if use_cache else {}
    pending = []
    for i, spec, key in todo:
        if key in cached:
            judgments[i][spec.evaluator.criterion] = Judgment.from_data(cached[key])
        else:
            pending.append((i, spec, key))

    def evaluate(item: tuple[int, Any, str]) -> Judgment:
        i, spec, _ = item
        try:
            return spec.evaluator.evaluate(*pairs[i])
        except EvaluationError as exc:  # an expected per-case failure: missing with its reason
            return Judgment.missing(str(exc))
        except Exception as exc:  # noqa: BLE001 - an evaluator failing on one case: that judgment is missing
            return Judgment.missing(f"evaluator_error: {type(exc).__name__}: {exc}")

    # In-process evaluators run here; those that wait on a service (LLM judges declare
    # `concurrent = True`) run `concurrency` at a time.
    slow = [t for t in pending if getattr(t[1].evaluator, "concurrent", False)]
    fast = [t for t in pending if not getattr(t[1].evaluator, "concurrent", False)]
    usage: dict[str, dict] = {}
    writer = CacheWriter(store, "judgment")  # every judgment paid for is committed as it arrives

    def keep(item: tuple[int, Any, str], judgment: Judgment) -> None:
        i, spec, key = item
        criterion = spec.evaluator.criterion
        judgments[i][criterion] = judgment
        if judgment.status != "missing":
            writer.put(key, judgment.to_data())
        spent = judgment.detail.get("usage") if judgment.detail else None
        if spent:
            total = usage.setdefault(criterion, {"calls": 0})
            total["calls"] += 1
            for name, value in spent.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    total[name] = total.get(name, 0) + value

    interrupted = False
    try:
        for item in fast:
            keep(item, evaluate(item))
        if slow:
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
        writer.close()
    figures: dict = {"judgment": [len(todo) - len(pending), len(pending)]}
    if usage:
        figures["usage"] = usage
    return judgments, figures, interrupted


def judge_cases(suite: Suite, store: Any, executions: list[Execution | None], caches: dict,
                use_cache: bool = True) -> tuple[list[dict], bool]:
    """The judgments of a run's cases, and whether Ctrl-C stopped the judging; the cache figures
    go into ``caches``."""
    judgments, figures, interrupted = judge_until_interrupted(list(zip(suite.cases, executions)), suite.evaluators,
                                                              store, suite.concurrency, use_cache)
    caches.update(figures)
    return judgments, interrupted


def summarize(suite: Suite, results: list[CaseResult], confidence: float,
              metrics: dict | None = None) -> tuple[dict, list]:
    """The metric of every criterion, then the exploratory slice table.

    :param metrics: criterion -> metric, when not the suite's own (a sequential run's anytime ones).
    """
    metrics = suite.metrics if metrics is None else metrics
    summaries = {}
    for spec in suite.evaluators:
        criterion = spec.evaluator.criterion
        summaries[criterion] = metrics[criterion].summarize([r.judgments[criterion] for r in results],
                                                                  confidence)
    rows: list[tuple[str, str, str, Summary | None]] = []
    for slice_ in suite.slices:
        groups: dict[str, list[CaseResult]] = {}
        for result in results:
            key = result.slices.get(slice_.name)
            if key is not None:
                groups.setdefault(key, []).append(result)
        for key in sorted(groups):
            members = groups[key]
            for spec in suite.evaluators:
                criterion = spec.evaluator.criterion
                summary = metrics[criterion].summarize([r.judgments[criterion] for r in members], confidence)
                rows.append((slice_.name, key, criterion, summary))
    return summaries, rows


def run_suite(suite: Suite, plugins: Plugins, store: Any, use_cache: bool = True,
              sequential: Any = None) -> RunOutcome:
    """Execute, judge, summarise, decide and store one run.

    :param use_cache: False re-executes and re-judges every case (the caches are still written).
    :param sequential: a :class:`~oloproof_core.sequential.Sequential`: run the cases in its seeded
        order, batch by batch, until the gate is decided, with anytime-valid intervals.
    """
    run_id = new_run_id()
    system = suite.system
    caches: dict = {}
    header = {"id": run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "system": {"name": system.name, "version": system.version, "kind": suite.system_kind,
                         "identity": system.identity},
              "config": suite.config_path.name,
              "evaluators": {s.evaluator.criterion: s.identity for s in suite.evaluators},
              "metrics": {s.evaluator.criterion: s.evaluator.metric for s in suite.evaluators},
              "cases": len(suite.cases)}
    plugins.pm.hook.oloproof_run_started(run=header)
    confidence = suite.policy.confidence_level if suite.policy else 0.95
    judges = {s.evaluator.criterion: digest(s.identity) for s in suite.evaluators
              if getattr(s.evaluator, "judge", False) is True}
    cases, metrics, not_run = list(suite.cases), suite.metrics, 0
    if sequential is None:
        executions, interrupted = execute_cases(suite, plugins, store, caches, use_cache, run_id)
        judgments, stopped = judge_cases(suite, store, executions, caches, use_cache)
        interrupted = interrupted or stopped
    else:  # batch by batch until the gate is decided (sequential.py)
        def decide(by_criterion: dict, anytime: dict, left: int) -> list[Decision]:
            return decide_policy(suite.policy, by_criterion, anytime, confidence, judges, store, left)

        step = sequential.run(suite, plugins, store, caches, use_cache, decide, run_id)
        cases, metrics = [suite.cases[i] for i in step.indices], step.metrics
        executions, judgments, interrupted = step.executions, step.judgments, step.interrupted
        not_run = len(suite.cases) - len(cases)
        header.update(sequential=step.record, cases=len(cases))
    results = [CaseResult(case=c, execution=e, judgments=j,
                          slices={s.name: s.key(c, e) if e is not None else None for s in suite.slices})
               for c, e, j in zip(cases, executions, judgments)]
    stage_counts = getattr(system, "stage_counts", None)
    if stage_counts is not None:
        caches["stages"] = stage_counts()

    summaries, slice_rows = summarize(suite, results, confidence, metrics)
    decisions: list[Decision] = []
    verdict, exit_code = None, ExitCode.OK
    if suite.policy is not None and not interrupted:
        by_criterion = {s.evaluator.criterion: [r.judgments[s.evaluator.criterion] for r in results]
                        for s in suite.evaluators}
        decisions = decide_policy(suite.policy, by_criterion, metrics, confidence, judges, store, not_run)
        verdict, exit_code = gate(decisions, suite.policy.block_on)
    measured = any(j.observed for r in results for j in r.judgments.values())
    if interrupted:
        state, exit_code = "UNDECIDED/INTERRUPTED", ExitCode.INTERRUPTED
    elif not measured:  # every case missing (a dead service, say): nothing to decide on, never a PASS
        state = "UNMEASURED/COMPLETE"
        if suite.policy is not None:
            verdict, exit_code = "BLOCK", ExitCode.BLOCKED
    else:
        state = ("DECIDED" if suite.policy is not None else "UNGATED") + ("/SEQUENTIAL" if sequential else "/COMPLETE")
    header["state"] = state
    header["slices"] = [s.name for s in suite.slices]
    header["min_slice_support"] = suite.min_slice_support
    header["relevance_unit"] = suite.relevance_unit  # what every position of this run counts
    header["confidence_level"] = confidence
    summary = {
        "state": state, "gate": verdict, "exit_code": int(exit_code), "caches": caches,
        "decisions": [{"rule": d.rule, "metric": d.metric, "verdict": d.verdict, "reason": d.reason}
                      for d in decisions],
        "metrics": {k: {"value": s.value, "low": s.low, "high": s.high, "observed": s.observed,
                        "missing": s.missing, "excluded": s.excluded, "cells": list(s.cells), "metric": s.metric}
                    for k, s in summaries.items()},
        "policy": policy_data(suite.policy),
    }
    records = []
    for r in results:
        execution = r.execution or Execution(missing="interrupted")
        record = {"id": r.case.id, "case": r.case.to_data(), **execution.to_data(),
                  # in the suite's order of criteria, however the judgments arrived (cache hits first)
                  "judgments": {k: r.judgments[k].to_data() for k in summaries if k in r.judgments}}
        if r.slices:
            record["slices"] = r.slices
        records.append(record)
    store.save_run(header, records, summary)
    if plugins.pm.hook.oloproof_case_finished.get_hookimpls():  # no per-case cost when nobody listens
        for r in results:
            plugins.pm.hook.oloproof_case_finished(run=header, case=r.case, execution=r.execution,
                                                   judgments=r.judgments)
    plugins.pm.hook.oloproof_run_finished(run=header, summary=summary)
    return RunOutcome(run_id=run_id, header=header, results=results, summaries=summaries, slices=slice_rows,
                      decisions=decisions, gate=verdict, exit_code=exit_code, state=state, caches=caches,
                      empty_slices=[s.name for s in suite.slices if not any(r.slices.get(s.name) for r in results)])
