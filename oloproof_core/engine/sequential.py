"""Anytime-valid runs: cases in a seeded random order, batch by batch, until the gate is decided.

``oloproof run --until-decided`` (or ``sequential: {until_decided: true}`` in the policy) executes
and judges the suite's cases in an order drawn from ``seed``, ``batch`` cases at a time. After each
batch every rule is decided on the cases run so far, and the run stops as soon as the gate cannot
change: no rule is INSUFFICIENT_EVIDENCE, or a rule FAILed and FAIL blocks.

Looking after every batch and stopping on what one sees would break an ordinary interval's level.
The betting interval does not: for each candidate mean its capital is a nonnegative martingale, so
by Ville's inequality it stays below 2/α at *every* sample size with probability 1 - α/2
(Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by betting", JRSS-B
86(1):1-27; Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic
confidence sequences", Annals of Statistics 49(2):1055-1080). So in this mode every metric, pass/fail
ones included, is summarised and decided with a confidence sequence valid under optional stopping:
the betting interval by default, or the one ``sequential.interval`` names (``adaptive-betting``,
statistics/adaptive.py; ``beta-binomial`` and ``group-sequential``, statistics/sequences.py). A
case order drawn at random makes the cases run so far a random sample of the suite's. An
``observed_count`` rule counts the failures of the whole suite, so the cases not run count as
possible failures: it can FAIL early, and PASS only once every case has run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from attrs import frozen

from oloproof_core.statistics import display, intervals as stats
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import Execution, Judgment, Summary, tally

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


@frozen(kw_only=True)
class Step:
    """What a sequential run executed: the suite indices of the cases run, in the order they ran,
    their executions and judgments, whether it was interrupted, the anytime metrics and the record."""

    indices: list[int]
    executions: list[Execution | None]
    judgments: list[dict]
    interrupted: bool
    metrics: dict
    record: dict


def gate_settled(decisions: Sequence[Any], block_on: Sequence[str]) -> bool:
    """Whether more cases could not change the gate: no rule undecided, or a blocking FAIL."""
    if "FAIL" in block_on and any(d.verdict == "FAIL" for d in decisions):
        return True
    return not any(d.verdict == "INSUFFICIENT_EVIDENCE" for d in decisions)


@frozen(kw_only=True)
class Sequential:
    """The settings of a sequential run: the seed of the case order and the batch size."""

    seed: int = 0
    batch: int = 10
    interval: str = "betting"

    def order(self, total: int) -> list[int]:
        """The suite indices in the order they run: a permutation drawn from ``seed``."""
        import numpy as np

        return [int(i) for i in np.random.default_rng(self.seed).permutation(total)]

    def run(self, suite: Any, plugins: Any, store: Any, caches: dict, use_cache: bool,
            decide: Any, run_id: str | None = None, progress: Any = None) -> Step:
        """Execute and judge batch by batch until ``decide(judgments_of, not_run)`` settles the gate.

        :param decide: (criterion -> judgments of the cases run, cases not run) -> decisions, with
            the anytime metrics; the runner's own decision function.
        """
        from oloproof_core.engine.execution import execute_cases
        from oloproof_core.engine.judging import judge_cases
        from oloproof_core.engine.runner import merge_figures

        metrics = {name: AnytimeMetric(metric, self.interval, len(suite.cases), self.batch)
                   for name, metric in suite.metrics.items()}
        order, done, executions, judgments = self.order(len(suite.cases)), [], [], []
        looks, interrupted, decisions = 0, False, []
        caches.update({"execution": [0, 0], "judgment": [0, 0]})
        for start in range(0, len(order), self.batch):
            batch = order[start:start + self.batch]
            part = attrs.evolve(suite, cases=tuple(suite.cases[i] for i in batch))
            figures: dict = {}
            batch_executions, interrupted = execute_cases(part, plugins, store, figures, use_cache, run_id, progress)
            batch_judgments, stopped = judge_cases(part, store, batch_executions, figures, use_cache, progress)
            interrupted = interrupted or stopped
            merge_figures(caches, figures)
            done += batch
            executions += batch_executions
            judgments += batch_judgments
            looks += 1
            if interrupted:
                break
            by_criterion = {name: [j[name] for j in judgments] for name in metrics}
            decisions = decide(by_criterion, metrics, len(order) - len(done))
            if gate_settled(decisions, suite.policy.block_on):
                break
        not_run = [suite.cases[i] for i in order[len(done):]]
        record = {"seed": self.seed, "batch": self.batch, "looks": looks, "cases_run": len(done),
                  "cases_total": len(order), "cases_not_run": len(not_run),
                  "judge_calls_not_made": judge_calls(suite, not_run), "interval": self.interval,
                  "method": METHODS[self.interval],
                  "stopped": "gate_decided" if len(done) < len(order) and not interrupted else
                             ("interrupted" if interrupted else "all_cases_run")}
        # in the order they ran: the adaptive interval reads them in that order, at every look and at the end
        return Step(indices=done, executions=executions, judgments=judgments, interrupted=interrupted,
                    metrics=metrics, record=record)


def judge_calls(suite: Any, cases: Sequence[Any]) -> int:
    """The LLM-judge requests the cases not run would have needed at most (some may be cached)."""
    count = 0
    for spec in suite.evaluators:
        if getattr(spec.evaluator, "judge", False) is not True:
            continue
        exclude = getattr(spec.evaluator, "exclude", None)
        count += sum(1 for case in cases if exclude is None or exclude(case) is None)
    return count


def plan(suite: Any, until_decided: bool, seed: int | None, batch: int | None) -> Sequential | None:
    """The sequential settings of a run, from the command line over the policy's, or None.

    :raises ConfigError: when a sequential run is asked for without a policy, or with a batch below 1.
    """
    options = suite.policy.sequential if suite.policy is not None else None
    if not until_decided and not (options is not None and options.until_decided):
        if seed is not None or batch is not None:
            raise ConfigError("--seed and --batch set the order and the looks of a sequential run"
                              + (" (or --seed the cases --sample draws)" if batch is None else ""),
                              fix="add --until-decided" + (" or --sample N" if batch is None else "")
                              + ", or leave them out")
        return None
    if not suite.design.plain:
        raise ConfigError("a sequential run looks at cases one by one, and this suite sets trials or cluster",
                          fix="run without --until-decided (and sequential.until_decided), or without trials "
                              "and cluster")
    if suite.policy is None:
        raise ConfigError("--until-decided stops when the gate is decided, and this suite has no policy",
                          fix="add a policy with rules to oloproof.yaml, or run without --until-decided")
    seed = options.seed if seed is None else seed
    batch = options.batch if batch is None else batch
    if batch < 1:
        raise ConfigError(f"the batch must be at least 1 case, got {batch}", fix="pass --batch 10")
    return Sequential(seed=seed, batch=batch, interval=options.interval if options is not None else "betting")
