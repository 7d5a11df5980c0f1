"""The runner: cases -> system (execution.py) -> evaluators -> metrics -> gate -> store.

Results are always reported in case order, whatever the concurrency; a sequential run's
(``sequential.py``) in the order its cases ran.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import attrs
from attrs import field, frozen

from oloproof_core.model.errors import ExitCode
from oloproof_core.engine.conversations import FirstFailing, execute_waves, judge_conversations, whole_batches
from oloproof_core.engine.execution import Executions
from oloproof_core.engine.judging import judge_suite
from oloproof_core.decisions.gate import Decision, decide_policy, gate, policy_data
from oloproof_core.decisions.threshold import run_metrics
from oloproof_core.model.identity import digest
from oloproof_core.model.retrieval import judged_case
from oloproof_core.model.records import Case, Execution, Summary
from oloproof_core.hooks.manager import Plugins
from oloproof_core.storage.stores import run_writer
from oloproof_core.engine.suite import Suite
from oloproof_core.statistics.tallies import RunTally
from oloproof_core.statistics.units import (
    ALL_TURNS, cluster_of, combine_trials, derived_criteria, pass_all, pass_all_name, unit_figures,
)
from oloproof_core.storage.cache_writer import CacheWriter

BATCH = 2000  # cases executed, judged and stored together; a run holds no more than this many at once

class CaseResult(NamedTuple):
    """One finished case of a run, as the tally and the record read it (a tuple: made once a case)."""

    case: Case
    execution: Execution | None  # None: the run was interrupted before this case finished
    judgments: dict  # criterion -> Judgment
    slices: dict  # slice name -> group (None: not in any group)
    trials: list  # (execution, judgments, case) of every trial, with `trials:` above 1
    cluster: str | None  # the case's cluster, with `cluster:`


@frozen(kw_only=True)
class RunOutcome:
    run_id: str
    header: dict
    tally: RunTally  # the run's counts (cases without output, reasons); its cases are in the store
    summaries: dict  # criterion -> Summary
    slices: list[tuple[str, str, str, Summary | None]]  # slice, group, criterion, summary
    decisions: list[Decision]
    gate: str | None
    exit_code: ExitCode
    state: str  # "DECIDED/COMPLETE", ...
    caches: dict = field(factory=dict)
    units: dict = field(factory=dict)  # with trials or clusters: "instability" and "clusters" (units.py)
    human: dict = field(factory=dict)  # judge criterion -> its human-level record (None: no labels; human.py)


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # base32 without I, L, O, U


def new_run_id(milliseconds: int | None = None, randomness: bytes | None = None) -> str:
    """``run_`` and a ULID: 48 bits of Unix time in milliseconds, then 80 random bits, as 26
    Crockford base32 characters, so ids sort by the time they were made (docs/runs.md)."""
    if milliseconds is None:
        milliseconds = time.time_ns() // 1_000_000
    value = (milliseconds << 80) | int.from_bytes(os.urandom(10) if randomness is None else randomness)
    return "run_" + "".join(CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def with_trials(suite: Suite, items: Sequence[Case], executions: list, judgments: list[dict]) -> Iterator[tuple]:
    """Each case of a batch (``items``: its cases, each repeated for its trials) with its first
    trial's execution, its judgments over its trials (with pass^k of each pass/fail criterion) and
    every trial's (case, execution, judgments): a conversation's turn keeps each trial's history."""
    count = suite.design.trials
    if count == 1:
        yield from ((case, e, j, []) for case, e, j in zip(items, executions, judgments))
        return
    for i in range(len(items) // count):
        case = items[i * count]
        runs = list(zip(executions[i * count:(i + 1) * count], judgments[i * count:(i + 1) * count],
                        items[i * count:(i + 1) * count]))
        combined: dict = {}
        for criterion, metric in suite.metrics.items():
            if criterion in runs[0][1]:
                combined[criterion] = combine_trials([j[criterion] for _, j, _ in runs])
                if getattr(metric, "pass_fail", False):
                    combined[pass_all_name(criterion)] = pass_all([j[criterion] for _, j, _ in runs])
        yield case, runs[0][0], combined, runs


def stream_cases(suite: Suite, plugins: Plugins, store: Any, caches: dict, use_cache: bool, run_id: str,
                 progress: Any, finished: Callable[[list[tuple]], None]) -> bool:
    """Execute and judge the suite's cases ``BATCH`` at a time (every trial of a case in its case's
    batch), handing each batch's (case, execution, judgments, trials) to ``finished`` in case order
    before the next batch is read. Returns whether Ctrl-C stopped it: the cases not finished then,
    and every later one, are handed over as interrupted."""
    count = suite.design.trials
    # one writer for the whole run and both caches: it commits while the next batch runs
    writer = CacheWriter(store, "execution")
    executions = Executions(suite, plugins, store, caches, use_cache, run_id, progress, writer)
    judged = writer.to("judgment")
    interrupted = False
    caches.setdefault("judgment", [0, 0])
    try:
        for batch in whole_batches(suite.cases, BATCH):  # a conversation's turns in one batch
            items = batch if count == 1 else [attrs.evolve(c, trial=t) for c in batch for t in range(count)]
            done: list = [None] * len(items)
            if not interrupted:
                try:  # in waves, a turn after its conversation's earlier turns (conversations.py)
                    items, done, interrupted = execute_waves(executions.batch, items)
                except KeyboardInterrupt:  # between the executor's own handling: the batch is not run
                    interrupted = True
            judgments, figures, stopped = judge_suite(list(zip(items, done)), suite, store, use_cache, progress, judged)
            interrupted = interrupted or stopped
            merge_figures(caches, figures)
            finished(judge_conversations(conversation_criteria(suite.metrics), list(with_trials(suite, items, done, judgments))))
    finally:
        try:
            executions.close()
        finally:
            writer.close()
    return interrupted


def conversation_criteria(metrics: dict) -> dict[str, str]:
    """The suite's conversation criteria (``answer_correct (all turns)``), each with its turn criterion."""
    return {name: name[:-len(ALL_TURNS)] for name in metrics if name.endswith(ALL_TURNS)}


def slice_key(slice_: Any, case: Case, execution: Execution, judgments: dict, judge: str | None) -> str | None:
    """The slice group of a case; for a case without human relevance labels, read from the relevance
    judge's (relevance: {source: judge}), and then marked ``(judged)`` where they decided it."""
    labelled = judged_case(case, judgments, judge)
    key = slice_.key(labelled, execution)
    if labelled is not case and key is not None and key != slice_.key(case, execution):
        return f"{key} (judged)"
    return key


def merge_figures(caches: dict, figures: dict) -> None:
    """Add one batch's cache and usage figures to the run's."""
    for key in ("execution", "judgment"):
        if key in figures:
            hits, misses = figures[key]
            total = caches.setdefault(key, [0, 0])
            caches[key] = [total[0] + hits, total[1] + misses]
    for stage, (hits, misses) in figures.get("remote_stages", {}).items():  # counted on an executor's replicas
        total = caches.setdefault("remote_stages", {}).setdefault(stage, [0, 0])
        total[0] += hits
        total[1] += misses
    for origin, n in figures.get("reused", {}).items():  # an opaque system's executions from the cache
        caches.setdefault("reused", {})[origin] = caches.get("reused", {}).get(origin, 0) + n
    for criterion, spent in figures.get("usage", {}).items():
        total = caches.setdefault("usage", {}).setdefault(criterion, {})
        for name, value in spent.items():
            total[name] = total.get(name, 0) + value


def judged_note(summary: Summary, judged: int, metric: str) -> Summary:
    """A metric row built (in part) on judged relevance labels says so in its counts: ``· 12
    judged``; for a fraction (recall), that it is recall among the retrieved candidates."""
    if not judged:
        return summary
    import attrs

    estimate, interval, counts = summary.cells
    note = f"{judged} judged" + (" (recall among retrieved)" if metric == "fraction" else "")
    return attrs.evolve(summary, cells=(estimate, interval, f"{counts} · {note}"))


def summarize(suite: Suite, tally: RunTally, confidence: float, metrics: dict) -> tuple[dict, list]:
    """The metric of every criterion, then the exploratory slice table."""
    summaries = {criterion: judged_note(metric.summarize(tally.units(criterion), confidence), tally.judged[criterion],
                                        getattr(metric, "name", ""))
                 for criterion, metric in metrics.items()}
    rows: list[tuple[str, str, str, Summary | None]] = []
    for slice_ in suite.slices:
        groups = tally.slices[slice_.name]
        for key in sorted(groups.groups):
            for criterion in groups.criteria:
                summary = metrics[criterion].summarize(tally.slice_units(slice_.name, key, criterion), confidence)
                rows.append((slice_.name, key, criterion, summary))
    return summaries, rows


def case_record(result: CaseResult, criteria: Iterable[str], trials: bool) -> dict:
    """What the store keeps of one case of a run."""
    execution = result.execution or Execution(missing="interrupted")
    record = {"id": result.case.id, "case": result.case.to_data(), **execution.to_data(),
              # in the suite's order of criteria, however the judgments arrived (cache hits first)
              "judgments": {k: result.judgments[k].to_data() for k in criteria if k in result.judgments}}
    if result.slices:
        record["slices"] = result.slices
    if result.cluster is not None:
        record["cluster"] = result.cluster
    if trials:  # every trial's execution and judgments; the top level is the first trial's
        record["trials"] = [{**(e or Execution(missing="interrupted")).to_data(),
                             "judgments": {k: j.to_data() for k, j in js.items()},
                             **({"history": c.history_data()} if c.history else {})}
                            for e, js, c in result.trials]
    return record


def run_suite(suite: Suite, plugins: Plugins, store: Any, use_cache: bool = True,
              sequential: Any = None, selection: dict | None = None, progress: Any = None) -> RunOutcome:
    """Execute, judge, summarise, decide and store one run.

    The cases stream through in batches (:func:`stream_cases`): each batch is executed, judged,
    counted (tallies.py) and written to the store before the next is read, so memory does not grow
    with the number of cases; the run becomes visible in the store when its summary is written. A
    run stopped by an error leaves nothing in the store (its finished executions and judgments
    stay in the caches).

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
    metrics, not_run = suite.metrics, 0
    design = suite.design
    if not design.plain:  # every criterion over units (cases with their trials, or clusters)
        metrics = run_metrics(suite.metrics, design, None)  # as compare's floor rebuilds them (threshold.py)
        header["design"] = design.record()
        header["evaluators"], header["metrics"] = derived_criteria(header["evaluators"], header["metrics"],
                                                                list(suite.metrics), design)
    writer = run_writer(store, run_id)
    listening = bool(plugins.pm.hook.oloproof_case_finished.get_hookimpls())  # no per-case cost otherwise
    tally = RunTally(metrics, suite.slices, suite.slice_criteria, design.cluster is not None, design.trials > 1)
    # each case's verdicts of the judge criteria, for human.py: only where labels can apply (it grows with the run)
    labelled = judges and (any(c in judges for c in getattr(suite.policy, "labels", None) or {})
                           or any(r.get("criterion") in judges for _, r in store.list_objects("label")))
    verdicts: list | None = [] if labelled and design.plain and sequential is None else None
    derived = conversation_criteria(suite.metrics)
    conversations = FirstFailing(derived) if derived else None  # the First failing turn: line

    def finished(part: list[tuple]) -> None:
        """A batch of finished cases: counted, stored, and told to the plugins that listen."""
        results = [CaseResult(case=c, execution=e, judgments=j, trials=t, cluster=cluster_of(c, design.cluster),
                              slices={s.name: slice_key(s, c, e, j, suite.relevance_judge) if e is not None else None
                                      for s in suite.slices} if suite.slices else {})
                   for c, e, j, t in part]
        for r in results:
            tally.add(r)
        if conversations is not None:
            conversations.add(part)
        records = [case_record(r, metrics, design.trials > 1) for r in results]
        writer.add(records)
        if verdicts is not None:
            from oloproof_core.storage.labels import execution_digest

            verdicts.extend((r["id"], execution_digest(r), {c: r["judgments"].get(c, {}).get("status") for c in judges})
                            for r in records)
        if listening:
            for r in results:
                plugins.pm.hook.oloproof_case_finished(run=header, case=r.case, execution=r.execution,
                                                       judgments=r.judgments)

    try:
        if sequential is None:
            interrupted = stream_cases(suite, plugins, store, caches, use_cache, run_id, progress, finished)
        else:  # batch by batch until the gate is decided (sequential.py)
            def decide(by_criterion: dict, anytime: dict, left: int) -> list[Decision]:
                return decide_policy(suite.policy, by_criterion, anytime, confidence, judges, store, left)

            key, earlier = sequential.earlier(store, header, suite.policy, len(suite.cases))
            if earlier:  # one line on standard error, from the command line and from Python alike
                sys.stderr.write(sequential.warning(earlier) + "\n")
            step = sequential.run(suite, plugins, store, caches, use_cache, decide, run_id, progress)
            metrics = step.metrics  # anytime-valid, counted as the suite's criteria are
            tally = RunTally(metrics, suite.slices, suite.slice_criteria)
            interrupted = step.interrupted
            not_run = len(suite.cases) - len(step.indices)
            header.update(sequential={**step.record, "series": key,
                                      "earlier_seeds": sorted({e["seed"] for e in earlier}, key=str)},
                          cases=len(step.indices))
            finished([(suite.cases[i], e, j, []) for i, e, j in zip(step.indices, step.executions, step.judgments)])
        traced = getattr(system, "trace_figures", None)  # a traced system (traces:): its receiver's figures
        if traced is not None:
            header["traces"] = traced()
        outcome, summary = _conclude(suite, store, run_id, header, tally, caches, metrics, confidence, judges,
                                     not_run, interrupted, sequential is not None, verdicts)
        if conversations is not None:  # in the summary record and the report's units
            summary["conversations"] = outcome.units["conversations"] = conversations.record()
        writer.finish(header, summary)
    except BaseException as first:
        try:
            writer.abort()  # nothing half-written: the finished work is in the caches
        except Exception as cleanup:  # noqa: BLE001 - the first error is the one to report
            first.add_note(f"(and the run's case rows could not be removed: {cleanup}; the next run begun in the "
                           "store removes them)")
        raise
    plugins.pm.hook.oloproof_run_finished(run=header, summary=summary)
    return outcome


def _conclude(suite: Suite, store: Any, run_id: str, header: dict, tally: RunTally, caches: dict, metrics: dict,
              confidence: float, judges: dict, not_run: int, interrupted: bool,
              sequential: bool, verdicts: list | None = None) -> tuple[RunOutcome, dict]:
    """The outcome of a run whose cases are all counted (summaries, gate), and its summary record."""
    design = suite.design
    units = {}
    if not design.plain:
        keys = tally.clusters if tally.clusters is not None else [None] * tally.cases
        units = unit_figures(design, suite.metrics, tally.trials or [], keys, confidence)
    stage_counts = getattr(suite.system, "stage_counts", None)
    remote = caches.pop("remote_stages", {})  # counted by an executor's remote replicas
    if stage_counts is not None:
        counts = stage_counts()
        caches["stages"] = {stage: tuple(a + b for a, b in zip(counts.get(stage, (0, 0)), remote.get(stage, (0, 0))))
                            for stage in {**counts, **remote}}
    summaries, slice_rows = summarize(suite, tally, confidence, metrics)
    decisions: list[Decision] = []
    verdict, exit_code = None, ExitCode.OK
    evidence = {}
    if verdicts is not None and not interrupted:  # a plain run with judges: the human labels that apply
        from oloproof_core.engine.human import file_labels, human_evidence

        evidence = human_evidence(list(judges), verdicts, store, file_labels(suite.policy, suite.config_path.parent))
    if suite.policy is not None and not interrupted:
        by_criterion = {criterion: tally.units(criterion) for criterion in metrics}
        decisions = decide_policy(suite.policy, by_criterion, metrics, confidence, judges, store, not_run,
                                  {c: e.metric() for c, e in evidence.items()})
        verdict, exit_code = gate(decisions, suite.policy.block_on)
    if interrupted:
        state, exit_code = "UNDECIDED/INTERRUPTED", ExitCode.INTERRUPTED
    elif not tally.measured:  # every case missing (a dead service, say): nothing to decide on, never a PASS
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
                        "missing": s.missing, "excluded": s.excluded, "cells": list(s.cells), "metric": s.metric,
                        **({"judged": tally.judged[k]} if tally.judged[k] else {})}
                    for k, s in summaries.items()},
        "policy": policy_data(suite.policy),
        **units,
    }
    human = {c: evidence[c].record(confidence) if c in evidence else None for c in judges}
    if evidence:  # recorded only where labels exist, so other runs' records do not change
        summary["human_level"] = {c: r for c, r in human.items() if r is not None}
    return RunOutcome(run_id=run_id, header=header, tally=tally, summaries=summaries, slices=slice_rows,
                      decisions=decisions, gate=verdict, exit_code=exit_code, state=state, caches=caches,
                      units=units, human=human), summary
