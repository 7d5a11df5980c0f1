"""The metric of a sequential run: every criterion decided with a confidence sequence.

A run that looks after every batch and stops when the gate is decided (``engine/sequential.py``)
needs intervals valid at every look. The betting interval is one (Waudby-Smith & Ramdas 2024;
Howard, Ramdas, McAuliffe & Sekhon 2021), so such a run summarises and decides every metric, pass/fail
ones included, with it. It lives here, below the decisions, because a compare floor on a sequential
run decides that run's values with the same interval as the run did (``decisions/threshold.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from oloproof_core.model.records import Judgment, Summary, tally
from oloproof_core.statistics import display, intervals as stats

METHODS = {"betting": "betting confidence sequence (Waudby-Smith & Ramdas 2024), valid at every look",
           "adaptive-betting": "variance-adaptive betting confidence sequence, predictable plug-in bets tuned to the "
                               "suite's size (Waudby-Smith & Ramdas 2024), valid at every look",
           "beta-binomial": "beta-binomial mixture confidence sequence for pass/fail metrics (Robbins 1970; Howard et "
                            "al. 2021), betting for scores, valid at every look",
           "group-sequential": "exact group-sequential repeated confidence intervals for pass/fail metrics, alpha spent "
                               "over the run's planned looks (Lan & DeMets 1983; Jennison & Turnbull 1989), betting "
                               "for scores, valid at every planned look"}


class AnytimeMetric:
    """A metric summarised and decided with a confidence sequence on [0, 1], whatever its usual interval.

    The estimate and the counts are the wrapped metric's own; only the interval changes. ``method``
    is ``betting`` (the documented fixed grid of bets), ``adaptive-betting`` (predictable plug-in
    bets, ``adaptive.py``, which reads the values in the order the cases ran), ``beta-binomial`` or
    ``group-sequential`` (``sequences.py``; pass/fail values only, scores fall back to betting).
    ``total`` (the suite's size) and ``batch`` are fixed before the first case: the adaptive bets,
    the mixture's prior and the group-sequential looks are tuned to them, never to the cases seen.
    """

    def __init__(self, inner: Any, method: str = "betting", total: int | None = None, batch: int = 10):
        self.inner, self.method, self.total, self.batch = inner, method, total, batch
        self.name = getattr(inner, "name", None)
        self.pass_fail = getattr(inner, "pass_fail", False)

    def interval(self, values: Sequence[float], confidence: float) -> tuple[float, float]:
        total = max(self.total or 0, len(values))
        if self.method == "adaptive-betting":
            from oloproof_core.statistics.adaptive import adaptive_betting_interval

            return adaptive_betting_interval(values, confidence, 0.0, 1.0, horizon=total)
        if self.method in ("beta-binomial", "group-sequential"):
            from oloproof_core.statistics import sequences

            counts = sequences.pass_fail_counts(values)
            if counts is not None and self.method == "beta-binomial":
                return sequences.mixture_interval(*counts, confidence, horizon=total)
            if counts is not None:
                return sequences.group_sequential_interval(*counts, total, self.batch, confidence)
        return stats.betting_interval(values, confidence, 0.0, 1.0)

    def summarize(self, judgments: Sequence[Judgment], confidence: float) -> Summary:
        summary = self.inner.summarize(judgments, confidence)
        values, missing, excluded = tally(judgments)
        if not values:
            return summary
        low, high = self.interval(values, confidence)
        if summary.successes is not None:
            cells = display.proportion_cells(summary.successes, summary.observed, low, high, missing, excluded)
        else:
            cells = display.mean_cells(summary.value, summary.observed, low, high, missing, excluded)
        return attrs.evolve(summary, low=low, high=high, cells=cells)
