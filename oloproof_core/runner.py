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
from .identity import combine, digest
from .model import Case, Execution, Judgment, Summary
from .plugins import Plugins
from .suite import Suite
from .units import cluster_of, combine_trials, derived_criteria, group, pass_all, pass_all_name, unit_figures, unit_metrics
from .writer import CacheWriter

@frozen(kw_only=True)
class CaseResult:
    case: Case
    execution: Execution | None  # None: the run was interrupted before this case finished
    judgments: dict  # criterion -> Judgment
    slices: dict = field(factory=dict)  # slice name -> group (None: not in any group)
    trials: list = field(factory=list)  # (execution, judgments) of every trial, with `trials:` above 1
    cluster: str | None = None  # the case's cluster, with `cluster:`


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
    units: dict = field(factory=dict)  # with trials or clusters: "instability" and "clusters" (units.py)


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
                            concurrency: int, use_cache: bool = True,
                            progress: Any = None) -> tuple[list[dict], dict, bool]:
    """:func:`judge`, but Ctrl-C stops judging and returns what was judged: the judgments not
    made are missing (``interrupted``), and the third value says so.

    :param progress: told ``start("judgments", n)`` for the judgments not in the cache, ``step(judge_call)``
        as each is made (``judge_call``: an LLM judge's), and ``close()``.
    """
    judgments: list[dict] = [{} for _ in pairs]
    todo: list[tuple[int, Any, str]] = []
    identities = {id(spec): digest(spec.identity) for spec in specs}  # each evaluator's once per run
    for i, (case, execution) in enumerate(pairs):
        pair = None  # the digest of the case and its execution, made once for all evaluators
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
                if pair is None:
                    pair = digest({"case": case.to_data(), "execution": execution.to_data()})
                todo.append((i, spec, combine(identities[id(spec)], pair)))
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
        if progress is not None:
            progress.step(judge_call=getattr(spec.evaluator, "judge", False) is True)
        spent = judgment.detail.get("usage") if judgment.detail else None
        if spent:
            total = usage.setdefault(criterion, {"calls": 0})
            total["calls"] += 1
            for name, value in spent.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    total[name] = total.get(name, 0) + value

    interrupted = False
    if progress is not None:
        progress.start("judgments", len(pending))
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
        if progress is not None:
            progress.close()
        writer.close()
    figures: dict = {"judgment": [len(todo) - len(pending), len(pending)]}
    if usage:
        figures["usage"] = usage
    return judgments, figures, interrupted


def judge_cases(suite: Suite, store: Any, executions: list[Execution | None], caches: dict,
                use_cache: bool = True, progress: Any = None) -> tuple[list[dict], bool]:
    """The judgments of a run's cases, and whether Ctrl-C stopped the judging; the cache figures
    go into ``caches``."""
    judgments, figures, interrupted = judge_until_interrupted(list(zip(suite.cases, executions)), suite.evaluators,
                                                              store, suite.concurrency, use_cache, progress)
    caches.update(figures)
    return judgments, interrupted


def run_trials(suite: Suite, plugins: Plugins, store: Any, caches: dict, use_cache: bool,
               run_id: str, progress: Any = None) -> tuple[list, list[dict], list[list], bool]:
    """Execute and judge every case ``suite.design.trials`` times (each trial cached under its own
    key). Returns the first trial's executions, each case's judgments combined over its trials (with
    pass^k of each pass/fail criterion), every trial's (execution, judgments), and whether Ctrl-C
    stopped it."""
    import attrs

    count = suite.design.trials
    expanded = attrs.evolve(suite, cases=tuple(attrs.evolve(case, trial=t) for case in suite.cases
                                               for t in range(count)))
    executions, interrupted = execute_cases(expanded, plugins, store, caches, use_cache, run_id, progress)
    judgments, stopped = judge_cases(expanded, store, executions, caches, use_cache, progress)
    firsts, combined, trials = [], [], []
    for i in range(len(suite.cases)):
        runs = list(zip(executions[i * count:(i + 1) * count], judgments[i * count:(i + 1) * count]))
        case: dict = {}
        for criterion, metric in suite.metrics.items():
            if criterion in runs[0][1]:
                case[criterion] = combine_trials([j[criterion] for _, j in runs])
                if getattr(metric, "pass_fail", False):
                    case[pass_all_name(criterion)] = pass_all([j[criterion] for _, j in runs])
        firsts.append(runs[0][0])
        combined.append(case)
        trials.append(runs)
    return firsts, combined, trials, interrupted or stopped


def unit_judgments(results: Sequence[CaseResult], criterion: str) -> list[Judgment]:
    """One criterion's judgments, one per unit of analysis: per case, or per cluster."""
    return group([r.judgments[criterion] for r in results], [r.cluster for r in results])


def summarize(suite: Suite, results: list[CaseResult], confidence: float,
              metrics: dict | None = None) -> tuple[dict, list]:
    """The metric of every criterion, then the exploratory slice table.

    :param metrics: criterion -> metric, when not the suite's own (a sequential run's anytime ones).
    """
    metrics = suite.metrics if metrics is None else metrics
    summaries = {}
    for criterion, metric in metrics.items():
        summaries[criterion] = metric.summarize(unit_judgments(results, criterion), confidence)
    rows: list[tuple[str, str, str, Summary | None]] = []
    for slice_ in suite.slices:
        groups: dict[str, list[CaseResult]] = {}
        for result in results:
            key = result.slices.get(slice_.name)
            if key is not None:
                groups.setdefault(key, []).append(result)
        shown = suite.slice_criteria.get(slice_.name)  # None: every criterion
        for key in sorted(groups):
            members = groups[key]
            for criterion, metric in metrics.items():
                if shown is not None and criterion not in shown:
                    continue
                summary = metric.summarize(unit_judgments(members, criterion), confidence)
                rows.append((slice_.name, key, criterion, summary))
    return summaries, rows


def run_suite(suite: Suite, plugins: Plugins, store: Any, use_cache: bool = True,
              sequential: Any = None, selection: dict | None = None, progress: Any = None) -> RunOutcome:
    """Execute, judge, summarise, decide and store one run.

    :param use_cache: False re-executes and re-judges every case (the caches are still written).
    :param sequential: a :class:`~oloproof_core.sequential.Sequential`: run the cases in its seeded
        order, batch by batch, until the gate is decided, with anytime-valid intervals.
    :param selection: the record of the subset ``suite.cases`` holds (selection.py), kept in the header.
    :param progress: what is told of the cases and judgments as they finish (``oloproof run`` on
        a terminal: outputs/terminal.py's ``Progress``); None: nothing is.
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
    if selection is not None:
        header["selection"] = selection
    if suite.executor_name != "local":  # diagnose re-executes where the run executed
        header["executor"] = suite.executor_name
    plugins.pm.hook.oloproof_run_started(run=header)
    confidence = suite.policy.confidence_level if suite.policy else 0.95
    judges = {s.evaluator.criterion: digest(s.identity) for s in suite.evaluators
              if getattr(s.evaluator, "judge", False) is True}
    cases, metrics, not_run = list(suite.cases), suite.metrics, 0
    design, trials = suite.design, [[]] * len(suite.cases)
    if not design.plain:  # every criterion over units (cases with their trials, or clusters)
        metrics = unit_metrics(suite.metrics, design)
        header["design"] = design.record()
        header["evaluators"], header["metrics"] = derived_criteria(header["evaluators"], header["metrics"],
                                                                list(suite.metrics), design)
    if sequential is None and design.trials > 1:
        executions, judgments, trials, interrupted = run_trials(suite, plugins, store, caches, use_cache, run_id,
                                                                 progress)
    elif sequential is None:
        executions, interrupted = execute_cases(suite, plugins, store, caches, use_cache, run_id, progress)
        judgments, stopped = judge_cases(suite, store, executions, caches, use_cache, progress)
        interrupted = interrupted or stopped
    else:  # batch by batch until the gate is decided (sequential.py)
        def decide(by_criterion: dict, anytime: dict, left: int) -> list[Decision]:
            return decide_policy(suite.policy, by_criterion, anytime, confidence, judges, store, left)

        step = sequential.run(suite, plugins, store, caches, use_cache, decide, run_id, progress)
        cases, metrics = [suite.cases[i] for i in step.indices], step.metrics
        executions, judgments, interrupted = step.executions, step.judgments, step.interrupted
        not_run = len(suite.cases) - len(cases)
        header.update(sequential=step.record, cases=len(cases))
    results = [CaseResult(case=c, execution=e, judgments=j, trials=t, cluster=cluster_of(c, design.cluster),
                          slices={s.name: s.key(c, e) if e is not None else None for s in suite.slices})
               for c, e, j, t in zip(cases, executions, judgments, trials)]
    units = unit_figures(design, suite.metrics, [[j for _, j in r.trials] for r in results],
                         [r.cluster for r in results], confidence)
    stage_counts = getattr(system, "stage_counts", None)
    remote = caches.pop("remote_stages", {})  # counted by an executor's remote replicas
    if stage_counts is not None:
        counts = stage_counts()
        caches["stages"] = {stage: tuple(a + b for a, b in zip(counts.get(stage, (0, 0)), remote.get(stage, (0, 0))))
                            for stage in {**counts, **remote}}

    summaries, slice_rows = summarize(suite, results, confidence, metrics)
    decisions: list[Decision] = []
    verdict, exit_code = None, ExitCode.OK
    if suite.policy is not None and not interrupted:
        by_criterion = {criterion: unit_judgments(results, criterion) for criterion in metrics}
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
    if suite.slice_criteria:
        header["slice_criteria"] = {name: list(shown) for name, shown in suite.slice_criteria.items()}
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
        **units,
    }
    records = []
    for r in results:
        execution = r.execution or Execution(missing="interrupted")
        record = {"id": r.case.id, "case": r.case.to_data(), **execution.to_data(),
                  # in the suite's order of criteria, however the judgments arrived (cache hits first)
                  "judgments": {k: r.judgments[k].to_data() for k in summaries if k in r.judgments}}
        if r.slices:
            record["slices"] = r.slices
        if r.cluster is not None:
            record["cluster"] = r.cluster
        if design.trials > 1:  # every trial's execution and judgments; the top level is the first trial's
            record["trials"] = [{**(e or Execution(missing="interrupted")).to_data(),
                                 "judgments": {k: j.to_data() for k, j in js.items()}} for e, js in r.trials]
        records.append(record)
    store.save_run(header, records, summary)
    if plugins.pm.hook.oloproof_case_finished.get_hookimpls():  # no per-case cost when nobody listens
        for r in results:
            plugins.pm.hook.oloproof_case_finished(run=header, case=r.case, execution=r.execution,
                                                   judgments=r.judgments)
    plugins.pm.hook.oloproof_run_finished(run=header, summary=summary)
    return RunOutcome(run_id=run_id, header=header, results=results, summaries=summaries, slices=slice_rows,
                      decisions=decisions, gate=verdict, exit_code=exit_code, state=state, caches=caches, units=units,
                      empty_slices=[s.name for s in suite.slices if not any(r.slices.get(s.name) for r in results)])
