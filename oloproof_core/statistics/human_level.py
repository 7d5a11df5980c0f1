"""The human-level pass rate of a judge criterion: what people would say of a run, from all the
judge's verdicts and a few human labels.

Stratified by the judge's verdict. With π = P(judge pass), a = P(human pass | judge pass) and
b = P(human pass | judge fail), the human pass rate is θ = π·a + (1 − π)·b. Labels drawn at random
within each judge-verdict stratum (the label plan draws them so; any choice that does not look at
the answers does too) make a and b binomial, and the run's verdicts make π binomial. Each side of
the interval takes exact one-sided Clopper–Pearson (1934) bounds

- on a and on b at α/5 each (the direction of that side), and
- on π at α/20 in each direction,

and the extreme of θ over the π interval (θ is linear in π, so an endpoint). A union (Bonferroni)
bound over the four events keeps each side's error at most α/2 — so a gate that PASSes on the lower
bound PASSes a run whose human pass rate is below the threshold at most α/2 of the time (2.5% at
95%) — in finite samples, whatever the judge's accuracy, bias or the number of labels.

Pure functions of counts; ``engine/human.py`` finds the labels and the verdicts of a run.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from attrs import frozen

from oloproof_core.statistics.intervals import clopper_pearson

METHOD = ("human-level: stratified by the judge's verdict, θ = π·a + (1 − π)·b with exact Clopper-Pearson (1934) "
          "bounds on a = P(human pass | judge pass) and b = P(human pass | judge fail) at α/5 each and on "
          "π = P(judge pass) at α/20 each way, union bound (each side at most α/2)")
_STRATUM_SHARE = 0.2   # of α, for each of a and b on each side
_PI_SHARE = 0.05       # of α, for each direction of π


@frozen(kw_only=True)
class Labelled:
    """Human labels by judge verdict: ``pp`` judge pass & human pass, ``pf`` judge pass & human fail,
    ``fp`` judge fail & human pass, ``ff`` judge fail & human fail (as ``agreement.Table``)."""

    pp: int = 0
    pf: int = 0
    fp: int = 0
    ff: int = 0

    @property
    def n(self) -> int:
        return self.pp + self.pf + self.fp + self.ff


@functools.lru_cache(maxsize=65536)
def _one_sided(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Clopper–Pearson bounds each one-sided at ``alpha`` (the two-sided interval at 1 − 2α)."""
    return clopper_pearson(k, n, 1.0 - 2.0 * alpha)


def human_interval(passes: int, judged: int, t: Labelled, confidence: float) -> tuple[float, float]:
    """The interval for the human pass rate of the population the run's cases are drawn from.

    :param passes: cases of the run the judge passed; ``judged``: cases with a pass/fail verdict.
    :param t: the labelled cases, by judge verdict and human label (cases of the run, drawn at
        random within each verdict, independently of the answers).
    """
    alpha = 1.0 - confidence
    pi_low, pi_high = _one_sided(passes, judged, _PI_SHARE * alpha)
    a_low, a_high = _one_sided(t.pp, t.pp + t.pf, _STRATUM_SHARE * alpha)
    b_low, b_high = _one_sided(t.fp, t.fp + t.ff, _STRATUM_SHARE * alpha)
    low = min(p * a_low + (1 - p) * b_low for p in (pi_low, pi_high))
    high = max(p * a_high + (1 - p) * b_high for p in (pi_low, pi_high))
    return max(0.0, low), min(1.0, high)


def human_estimate(passes: int, judged: int, t: Labelled) -> float | None:
    """The stratified point estimate π̂·â + (1 − π̂)·b̂; None while a stratum the run has is unlabelled."""
    if not judged:
        return None
    pi = passes / judged
    if (pi > 0 and not t.pp + t.pf) or (pi < 1 and not t.fp + t.ff):
        return None
    a = t.pp / (t.pp + t.pf) if t.pp + t.pf else 0.0
    b = t.fp / (t.fp + t.ff) if t.fp + t.ff else 0.0
    return pi * a + (1 - pi) * b


@frozen
class HumanLevelMetric:
    """A run's metric of a judge criterion read at the human level, for :func:`decide_threshold`.

    ``interval(values, confidence)`` receives the run's judge verdicts (1 pass, 0 fail) of the
    ``observed`` units first, then any missing unit filled in at the worst or the best value; a filled
    unit counts at that value on the human scale too (a missing answer is a human fail at worst, a
    pass at best), so missing cases never help a rule pass, as for the judge's rate.
    """

    labelled: Labelled
    observed: int
    name: str = "human_level"
    pass_fail: bool = True

    def interval(self, values: Sequence[float], confidence: float) -> tuple[float, float]:
        real, fills = list(values[:self.observed]), list(values[self.observed:])
        low, high = human_interval(int(round(sum(real))), len(real), self.labelled, confidence)
        if not fills:
            return low, high
        total = len(real) + len(fills)
        filled = sum(fills)
        return (len(real) * low + filled) / total, (len(real) * high + filled) / total


def plan_labels(passes: int, judged: int, t: Labelled, threshold: float, confidence: float,
                agreement: float = 0.9, limit: int | None = None) -> tuple[int, int] | None:
    """The fewest labels (from the judge-pass stratum, from the judge-fail stratum), counting the
    ones already made, whose interval would decide a ``min``/``max`` at ``threshold`` if the observed
    agreement in each stratum holds (an unlabelled stratum is assumed at ``agreement``).

    Labels go to the strata by Neyman allocation (share ∝ stratum size × √(p(1 − p)), with p
    smoothed), never more than a stratum has cases. None: no number of labels up to every case
    (or ``limit``) would decide it.
    """
    fails = judged - passes

    def rate(k: int, n: int, assumed: float) -> float:
        return (k + 1) / (n + 2) if n else assumed

    a = rate(t.pp, t.pp + t.pf, agreement)
    b = rate(t.fp, t.fp + t.ff, 1 - agreement)
    spread_pass, spread_fail = passes * (a * (1 - a)) ** 0.5, fails * (b * (1 - b)) ** 0.5
    share = spread_pass / (spread_pass + spread_fail) if spread_pass + spread_fail else 0.5
    a_hat = t.pp / (t.pp + t.pf) if t.pp + t.pf else agreement
    b_hat = t.fp / (t.fp + t.ff) if t.fp + t.ff else 1 - agreement
    top = judged if limit is None else min(judged, limit)
    for total in range(max(t.n, 1), top + 1):
        n1 = min(passes, max(t.pp + t.pf, int(round(total * share))))
        n0 = min(fails, max(t.fp + t.ff, total - n1))
        n1 = min(passes, max(n1, total - n0))
        pp = int(round(n1 * a_hat))
        fp = int(round(n0 * b_hat))
        low, high = human_interval(passes, judged, Labelled(pp=pp, pf=n1 - pp, fp=fp, ff=n0 - fp), confidence)
        if low >= threshold or high < threshold:
            return n1, n0
    return None
