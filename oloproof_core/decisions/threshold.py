"""One run's metric against a threshold: the one decision the gate and compare's floor share.

A run's gate decides its ``min``/``max`` and ``max_failures`` rules here, and ``compare`` decides a
``floor`` (any rule on one run's values) here too, on the same units and with the same interval:
:func:`run_metrics` rebuilds the metric a run decided with from what its header records (trials
and clusters: ``statistics/units.py``; a sequential run's confidence sequence:
``statistics/anytime.py``), and :func:`run_units` groups the run's case judgments into the run's
units. So the two commands cannot disagree about the same run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attrs import frozen

from oloproof_core.model.records import Column, Judgment, Metric, tally
from oloproof_core.statistics.units import Design, group, unit_metrics, unit_sizes


@frozen(kw_only=True)
class Rule:
    id: str
    metric: str
    kind: str = "interval"
    min: float | None = None
    max: float | None = None
    max_failures: int | None = None
    margin: float | None = None


@frozen(kw_only=True)
class Decision:
    rule: str
    metric: str
    verdict: str
    reason: str


def design_of(header: Mapping[str, Any]) -> Design | None:
    """The trials and clusters a stored run was summarised over (None: a plain run). A run recorded
    before the estimand was recorded estimated the mean of cluster means."""
    recorded = header.get("design")
    if not recorded:
        return None
    known = {k: recorded[k] for k in ("trials", "cluster", "max_cluster_size", "estimand") if k in recorded}
    return Design(**known)


def run_metrics(metrics: Mapping[str, Any], design: Design | None, sequential: Mapping[str, Any] | None) -> dict:
    """The metrics a run summarises and decides with, from its design and its sequential settings
    (the header's ``sequential`` record: ``interval``, ``cases_total``, ``batch``): over units with
    trials or clusters, as confidence sequences in a sequential run, else as they are."""
    if sequential is not None:
        from oloproof_core.statistics.anytime import AnytimeMetric

        method, total, batch = sequential.get("interval", "betting"), sequential.get("cases_total"), \
            sequential.get("batch", 10)
        return {name: AnytimeMetric(metric, method, total, batch) for name, metric in metrics.items()}
    if design is not None and not design.plain:
        return unit_metrics(metrics, design)
    return dict(metrics)


def run_units(judgments: Sequence[Judgment], clusters: Sequence[str | None] | None) -> Sequence[Judgment]:
    """A criterion's case judgments as the run's units: one per cluster when ``clusters`` (each
    case's cluster) is given, else the cases themselves."""
    if clusters is None:
        return judgments
    return group(list(judgments), list(clusters))


def case_counts(judgments: Sequence[Judgment], missing: int) -> tuple[int, int]:
    """The failed and the missing *cases* among ``judgments`` (an observed_count rule counts cases,
    whatever the unit: a cluster made by ``units.group`` records its failed and missing cases)."""
    if isinstance(judgments, Column):
        return judgments.failures, missing
    failures = missing = 0
    for j in judgments:
        if j.detail and "failures" in j.detail:  # a cluster
            failures += int(j.detail["failures"])
            missing += int(j.detail.get("missing_cases", 0))
        elif j.status == "fail":
            failures += 1
        elif j.status == "missing":
            missing += 1
    return failures, missing


def decide_threshold(rule: Rule, judgments: Sequence[Judgment], metric: Metric, confidence: float) -> Decision:
    """One rule on one criterion's units (:func:`run_units`), with ``metric`` (:func:`run_metrics`).

    A missing unit never helps a rule pass: an interval rule passes only if it would pass with
    every missing unit counted at the worst value, and fails only if it would fail with every
    missing unit at the best; an observed_count rule counts missing cases as possible failures.
    A metric over clusters (``sized``) reads each unit's number of cases, a missing cluster's too.
    """
    values, missing, _ = tally(judgments)
    make = lambda verdict, reason: Decision(rule=rule.id, metric=rule.metric, verdict=verdict, reason=reason)  # noqa: E731
    if rule.kind == "observed_count":
        failures, missing = case_counts(judgments, missing)
        if failures > rule.max_failures:
            return make("FAIL", "observed_failures_exceed_limit")
        if not values:  # nothing was judged: no evidence that the failures are within the limit
            return make("INSUFFICIENT_EVIDENCE", "no_observed_cases")
        if failures + missing > rule.max_failures:
            return make("INSUFFICIENT_EVIDENCE", "missing_cases_could_exceed_limit")
        return make("PASS", "observed_failures_within_limit")
    if not values:
        return make("INSUFFICIENT_EVIDENCE", "no_observed_cases")
    sized = getattr(metric, "sized", False) and not isinstance(judgments, Column)
    sizes, missing_sizes = unit_sizes(judgments) if sized else (None, None)

    def interval(fill: float | None) -> tuple[float, float]:
        """The interval of the observed units, with each missing one at ``fill`` (None: left out)."""
        extra = [] if fill is None or not missing else [fill] * missing
        if not sized:
            return metric.interval(values + extra if extra else values, confidence)
        return metric.interval(list(values) + extra, confidence, sizes + (missing_sizes if extra else []))

    worst_low, _ = interval(0.0)
    _, best_high = interval(1.0)
    low, high = interval(None) if missing else (worst_low, best_high)
    if rule.min is not None:
        if best_high < rule.min:
            return make("FAIL", "interval_below_minimum")
        if worst_low < rule.min:
            reason = "missing_cases_could_change_it" if low >= rule.min else "interval_overlaps_threshold"
            return make("INSUFFICIENT_EVIDENCE", reason)
    if rule.max is not None:
        worst_high = interval(1.0)[1]
        best_low = interval(0.0)[0]
        if best_low > rule.max:
            return make("FAIL", "interval_above_maximum")
        if worst_high > rule.max:
            reason = "missing_cases_could_change_it" if high <= rule.max else "interval_overlaps_threshold"
            return make("INSUFFICIENT_EVIDENCE", reason)
    return make("PASS", "interval_within_threshold")


def decide_on_run(rule: Rule, header: Mapping[str, Any], metric: Metric, judgments: Sequence[Judgment],
                  clusters: Sequence[str | None] | None, confidence: float) -> Decision:
    """``rule`` on one stored run's case judgments of ``rule.metric``, decided as that run's gate
    decides it: over the run's units (``clusters``: each case's recorded cluster) with the run's
    interval (its recorded design and sequential settings). ``metric`` is the criterion's plugin
    metric; the judgments are in the run's case order (a sequential run's: the order its cases ran)."""
    design = design_of(header)
    run_metric = run_metrics({rule.metric: metric}, design, header.get("sequential"))[rule.metric]
    clustered = design is not None and design.cluster is not None
    return decide_threshold(rule, run_units(judgments, clusters if clustered else None), run_metric, confidence)
