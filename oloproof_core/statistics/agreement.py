"""How far a judge agrees with human labels: Cohen's kappa and its bounds, and the human-level
pass rate of a run. Pure functions of counts; ``validation.py`` reads the labels and the runs,
``report.py`` prints the result.

- Cohen's kappa (Cohen 1960) with two intervals: the large-sample ``kappa ± z·SE`` of Fleiss, Cohen
  & Everitt (1969), kept in the record as a description, and a conservative finite-sample bound,
  the one printed and the one the policy's requirement reads (:func:`kappa_bounds`).
- The human-level pass rate of a run: the exact Clopper–Pearson interval of the labelled cases'
  human labels, and the prediction-powered point estimate of Angelopoulos et al. (2023).

docs/judges.md shows the arithmetic and the simulated coverage.
"""

from __future__ import annotations

import math

import numpy as np
from attrs import frozen

from oloproof_core.statistics.intervals import clopper_pearson

KAPPA_METHOD = ("kappa from Clopper-Pearson bounds on the true-positive rate, the true-negative rate and the human "
                "pass rate (Šidák-combined, each at 1 - (1 - α/2)^(1/3))")
KAPPA_LARGE_SAMPLE_METHOD = ("kappa ± z·SE, SE from Fleiss, Cohen & Everitt (1969), Psychological Bulletin "
                             "72(5):323-327, clipped to [-1, 1]")
RATE_METHOD = "Clopper-Pearson (1934), exact"
# The prediction-powered variance adds two pseudo-cases of each kind (Agresti & Caffo 2000), so its
# standard error is never 0; it is a large-sample figure and gets no printed interval.
_PSEUDO = 2.0


@frozen(kw_only=True)
class Table:
    """Judge verdict by human label, counts: ``pp`` judge pass & human pass, ``pf`` judge pass &
    human fail, ``fp`` judge fail & human pass, ``ff`` judge fail & human fail."""

    pp: int
    pf: int
    fp: int
    ff: int

    @property
    def n(self) -> int:
        return self.pp + self.pf + self.fp + self.ff


def cohen_kappa(t: Table) -> float | None:
    """(p_o - p_e) / (1 - p_e); None when p_e = 1 (both raters gave one and the same label throughout)."""
    n = t.n
    if n == 0:
        return None
    observed = (t.pp + t.ff) / n
    expected = ((t.pp + t.pf) * (t.pp + t.fp) + (t.fp + t.ff) * (t.pf + t.ff)) / n ** 2
    return None if expected >= 1.0 else (observed - expected) / (1.0 - expected)


def one_sided(t: Table) -> str | None:
    """Who gave every case the same label (``"humans"``, ``"judge"``), if anyone did."""
    if not (t.pp + t.fp) or not (t.pf + t.ff):
        return "humans"
    if not (t.pp + t.pf) or not (t.fp + t.ff):
        return "judge"
    return None


def kappa_standard_error(t: Table) -> float | None:
    """The large-sample (non-null) standard error of kappa, Fleiss, Cohen & Everitt (1969):

    Var = [Σᵢ pᵢᵢ(1 - (pᵢ. + p.ᵢ)(1 - κ))² + (1 - κ)² Σᵢ≠ⱼ pᵢⱼ(p.ᵢ + pⱼ.)² - (κ - pₑ(1 - κ))²] / (n(1 - pₑ)²),

    rows the judge's verdicts, columns the human labels (statsmodels' ``cohens_kappa().std_kappa``).
    None when kappa is undefined, or when one rater gave every case the same label.
    """
    kappa, n = cohen_kappa(t), t.n
    if kappa is None or one_sided(t):  # kappa is 0 by construction there, and its variance degenerate
        return None
    p = [[t.pp / n, t.pf / n], [t.fp / n, t.ff / n]]
    row = [p[0][0] + p[0][1], p[1][0] + p[1][1]]
    col = [p[0][0] + p[1][0], p[0][1] + p[1][1]]
    expected = row[0] * col[0] + row[1] * col[1]
    term_a = sum(p[i][i] * (1 - (row[i] + col[i]) * (1 - kappa)) ** 2 for i in (0, 1))
    term_b = (1 - kappa) ** 2 * sum(p[i][j] * (col[i] + row[j]) ** 2 for i in (0, 1) for j in (0, 1) if i != j)
    term_c = (kappa - expected * (1 - kappa)) ** 2
    return math.sqrt(max(0.0, term_a + term_b - term_c) / (n * (1 - expected) ** 2))


def kappa_interval(t: Table, confidence: float) -> tuple[float, float] | None:
    """The large-sample kappa ± z·SE at ``confidence``, clipped to [-1, 1]; None when undefined.

    It under-covers at the sizes a validation uses (docs/judges.md): it is kept in the record as a
    description, never printed as the interval and never read by the requirement.
    """
    from scipy.special import ndtri

    kappa, se = cohen_kappa(t), kappa_standard_error(t)
    if kappa is None or se is None:
        return None
    z = float(ndtri(0.5 + confidence / 2))
    return max(-1.0, kappa - z * se), min(1.0, kappa + z * se)


def kappa_of(tpr: np.ndarray | float, tnr: np.ndarray | float, prevalence: np.ndarray | float) -> np.ndarray:
    """Cohen's kappa of a judge with these true-positive and true-negative rates, on cases people
    pass at rate ``prevalence``: 2π(1 - π)(TPR + TNR - 1) / (π(1 - q) + (1 - π)q), q = πTPR + (1 - π)(1 - TNR).

    It increases in TPR and in TNR for every π in (0, 1), which is what makes :func:`kappa_bounds` work.
    """
    pi = np.asarray(prevalence, dtype=float)
    judge_pass = pi * tpr + (1 - pi) * (1 - tnr)
    denominator = pi * (1 - judge_pass) + (1 - pi) * judge_pass
    return 2 * pi * (1 - pi) * (np.asarray(tpr) + np.asarray(tnr) - 1) / denominator


def kappa_bounds(t: Table, confidence: float) -> tuple[float, float] | None:
    """A conservative finite-sample interval for Cohen's kappa; None when a rater was one-sided.

    Kappa is a function of the judge's TPR and TNR and the human pass rate π (:func:`kappa_of`),
    increasing in TPR and TNR. Each side of the interval takes one-sided Clopper–Pearson bounds on
    the three at level a = 1 - (1 - α/2)^(1/3) (TPR and TNR are independent given the human labels,
    and π is bounded by its own binomial; Šidák's combination keeps each side at α/2), then the
    lower bound is the least kappa at the lower TPR and TNR over π in its interval, the upper bound
    the greatest at the upper ones. The coverage is at least the confidence level (a union bound),
    and the seeded simulation in tests/core/test_agreement.py checks it at the default sizes.
    """
    from scipy.optimize import minimize_scalar

    alpha = 1.0 - confidence
    if cohen_kappa(t) is None or one_sided(t):  # kappa is 0 by construction when one rater is one-sided
        return None
    level = 1.0 - 2.0 * -math.expm1(math.log1p(-alpha / 2.0) / 3.0)  # two-sided CP with a on each side
    human_pass, human_fail = t.pp + t.fp, t.pf + t.ff
    tpr_low, tpr_high = clopper_pearson(t.pp, human_pass, level)
    tnr_low, tnr_high = clopper_pearson(t.ff, human_fail, level)
    pi_low, pi_high = clopper_pearson(human_pass, t.n, level)
    pi_low, pi_high = max(pi_low, 1e-12), min(pi_high, 1 - 1e-12)

    def extreme(tpr: float, tnr: float, sign: float) -> float:
        grid = np.linspace(pi_low, pi_high, 401)
        values = sign * kappa_of(tpr, tnr, grid)
        best = int(np.argmin(values))
        lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
        refined = minimize_scalar(lambda p: sign * float(kappa_of(tpr, tnr, p)), bounds=(lo, hi), method="bounded",
                                  options={"xatol": 1e-12}) if hi > lo else None
        found = float(values[best]) if refined is None else min(float(values[best]), float(refined.fun))
        return sign * found

    return max(-1.0, extreme(tpr_low, tnr_low, 1.0)), min(1.0, extreme(tpr_high, tnr_high, -1.0))


def rate(k: int, n: int, confidence: float) -> dict:
    """A proportion with its Clopper–Pearson interval, as stored."""
    if n == 0:
        return {"k": 0, "n": 0, "value": None, "low": None, "high": None}
    low, high = clopper_pearson(k, n, confidence)
    return {"k": k, "n": n, "value": k / n, "low": low, "high": high}


def prediction_powered(unlabelled: list[float], judged: list[float], human: list[float],
                       confidence: float) -> dict | None:
    """The human-level pass rate of a run, from the judge's verdicts and the human labels.

    Two figures:

    - ``labels``: the human labels of the n labelled cases with their exact Clopper–Pearson
      interval. Valid in finite samples (for labelled cases drawn like the run's): the interval
      that is printed.
    - ``prediction_powered``: the point estimate θ = mean(f over the N unlabelled) - mean(f - y over
      the labelled), clipped to [0, 1] (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic 2023, Science
      382(6671):669-674), with a large-sample standard error whose variances add two pseudo-cases
      of each kind (so it is never 0). Its normal interval θ ± z·SE under-covers when few cases are
      unlabelled, when the pass rate is near 0 or 1, or when the judge rarely errs (seeded
      simulation in tests/core/test_agreement.py): it is not printed, and the gate never reads it.

    :return: None with fewer than two unlabelled or two labelled cases.
    """
    big_n, n = len(unlabelled), len(judged)
    if big_n < 2 or n < 2:
        return None
    f_mean = sum(unlabelled) / big_n
    errors = [f - y for f, y in zip(judged, human)]
    bias = sum(errors) / n
    f_smooth = (sum(unlabelled) + _PSEUDO / 2) / (big_n + _PSEUDO)
    f_var = f_smooth * (1 - f_smooth)
    error_var = (sum(abs(e) for e in errors) + _PSEUDO / 2) / (n + _PSEUDO) - (sum(errors) / (n + _PSEUDO)) ** 2
    value = min(1.0, max(0.0, f_mean - bias))  # a pass rate: clipped to [0, 1] (it can leave it by -bias)
    labels = rate(int(round(sum(human))), n, confidence)
    return {"value": value, "standard_error": math.sqrt(f_var / big_n + error_var / n),
            "unlabelled": big_n, "labelled": n, "labels": labels}
