"""What a run's summary, gate and report need, counted as its cases stream past.

A run moves its cases through execute -> judge -> store in bounded batches (runner.py) and keeps
none of them: each finished case is added here, where every criterion keeps a status byte and a
value a case (:class:`~oloproof_core.model.Column`, read by the metrics and the gate as a sequence
of judgments), each slice group the same for its cases, and the report's counts (cases without an
output, reasons of missing and excluded judgments, a criterion failing for one reason every time)
are counters. A run with ``cluster:`` also keeps each case's cluster, and one with ``trials:``
each case's trial judgments (what the instability figures need).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from oloproof_core.model.records import Column, Judgment
from oloproof_core.statistics.units import group


class SameFailure:
    """Whether every observed judgment of one criterion failed, for one reason: the evidence of
    ``Failed: every answer_correct judgment (13 of 13) failed with field_absent``."""

    def __init__(self) -> None:
        self.judged = 0
        self.all_failed = True
        self.reasons: set = set()  # at most two kept: one is all the line needs to know
        self.fields: set[str] = set()  # the ``field`` details of the failures, JSON, at most two kept

    def add(self, judgment: Judgment) -> None:
        self.judged += 1
        if judgment.status != "fail":
            self.all_failed = False
            return
        if len(self.reasons) < 2:
            self.reasons.add(judgment.reason)
        if "field" in judgment.detail and len(self.fields) < 2:
            self.fields.add(json.dumps(judgment.detail.get("field")))

    @property
    def reason(self) -> str | None:
        """The one reason every judgment (two or more) failed with, else None."""
        if self.judged < 2 or not self.all_failed or len(self.reasons) != 1:
            return None
        return next(iter(self.reasons))


class Slices:
    """One slice's groups: a column per criterion shown, and the members' clusters when clustered."""

    def __init__(self, criteria: Sequence[str], clustered: bool):
        self.criteria, self.clustered = criteria, clustered
        self.groups: dict[str, dict[str, Column]] = {}
        self.clusters: dict[str, list] = {}

    def add(self, key: str, judgments: Mapping[str, Judgment], cluster: str | None) -> None:
        columns = self.groups.get(key)
        if columns is None:
            columns = self.groups[key] = {c: Column() for c in self.criteria}
            self.clusters[key] = []
        for criterion, column in columns.items():
            column.append(judgments[criterion])
        if self.clustered:
            self.clusters[key].append(cluster)


class RunTally:
    """A run's figures, added to case by case (:meth:`add`), in case order."""

    def __init__(self, criteria: Iterable[str], slices: Sequence[Any], slice_criteria: Mapping[str, Sequence[str]],
                 clustered: bool = False, trials: bool = False):
        self.criteria = list(criteria)
        self.columns = {c: Column() for c in self.criteria}
        self.slices = {s.name: Slices([c for c in self.criteria if s.name not in slice_criteria
                                       or c in slice_criteria[s.name]], clustered) for s in slices}
        self.clusters: list | None = [] if clustered else None
        self.trials: list | None = [] if trials else None
        self.cases = 0
        self.ran = 0  # cases that produced an output
        self.no_output: Counter = Counter()  # why the others did not ("interrupted", an error, ...)
        self.reasons = {c: {"missing": Counter(), "excluded": Counter()} for c in self.criteria}
        self.same = {c: SameFailure() for c in self.criteria}
        self.judged: Counter = Counter()  # criterion -> observed judgments built on judged relevance labels
        self.measured = False  # any observed judgment at all

    def add(self, result: Any) -> None:
        """One finished case (a runner.CaseResult): its judgments per criterion (over its trials)."""
        self.cases += 1
        execution = result.execution
        ran = execution is not None and execution.missing is None
        if ran:
            self.ran += 1
        else:
            self.no_output["interrupted" if execution is None else execution.missing] += 1
        judgments = result.judgments
        for criterion in self.criteria:
            judgment = judgments[criterion]
            self.columns[criterion].append(judgment)
            if judgment.observed:
                self.measured = True
                if judgment.detail and judgment.detail.get("judged"):
                    self.judged[criterion] += 1
            if ran:
                if judgment.status in ("missing", "excluded"):
                    self.reasons[criterion][judgment.status][judgment.reason or "unknown"] += 1
                elif judgment.observed:
                    self.same[criterion].add(judgment)
        for name, key in result.slices.items():
            if key is not None:
                self.slices[name].add(key, judgments, result.cluster)
        if self.clusters is not None:
            self.clusters.append(result.cluster)
        if self.trials is not None:
            self.trials.append([trial[1] for trial in result.trials])  # (execution, judgments, case)

    def units(self, criterion: str) -> Sequence[Judgment]:
        """One criterion's judgments, one per unit of analysis: per case, or per cluster."""
        column = self.columns[criterion]
        return column if self.clusters is None else group(list(column), self.clusters)

    def slice_units(self, name: str, key: str, criterion: str) -> Sequence[Judgment]:
        slices = self.slices[name]
        column = slices.groups[key][criterion]
        return column if not slices.clustered else group(list(column), slices.clusters[key])

    @property
    def empty_slices(self) -> list[str]:
        """The slices no case had a group in (a misspelt field, say)."""
        return [name for name, s in self.slices.items() if not s.groups]
