"""Admission of a judge by its bias: is it fit to gate on its own rate?

What a gate on a judge's rate gets wrong is the judge's bias, P(judge pass) − P(human pass): a rule
set at the human rate PASSes a judge biased upwards far more often than 2.5%. Admission by bias reads
two bounds from a validation's labelled cases (a random sample of the cases gated on):

- the bias |E[f − y]| (f the judge's verdict, y the human label, 1 for pass): the betting interval of
  Waudby-Smith & Ramdas (2024) on the differences f − y ∈ {−1, 0, +1} (``intervals.paired_difference``,
  as compare's), each side at α/2;
- the false-pass rate P(judge pass | human fail): its exact Clopper–Pearson (1934) upper bound at α/2.

The judge is admitted when the bias interval lies within ±``max_bias`` and the false-pass bound is
at most ``max_false_pass``. Admission is an intersection of one-sided tests, each at α/2: a judge
whose bias exceeds the limit, or whose false-pass rate does, is admitted at most α/2 of the time
(one error budget, not split: every way of being unfit must slip through its own test). The gate
itself decides on the human-level interval wherever the run has labels, whatever the admission.
"""

from __future__ import annotations

from oloproof_core.statistics.intervals import clopper_pearson, paired_difference

BIAS_METHOD = ("admission by bias: betting interval (Waudby-Smith & Ramdas 2024) on judge − human, each side α/2, "
               "and the exact Clopper-Pearson upper bound of P(judge pass | human fail) at α/2; intersection-union, "
               "a judge beyond either limit is admitted at most α/2 of the time")


def admit_by_bias(pp: int, pf: int, fp: int, ff: int, confidence: float, max_bias: float,
                  max_false_pass: float) -> dict:
    """Counts as ``agreement.Table`` (judge verdict first, then human label)."""
    n = pp + pf + fp + ff
    if n == 0:
        return {"bias": None, "bias_bounds": None, "false_pass_high": None, "met": False}
    judge = [1.0] * (pp + pf) + [0.0] * (fp + ff)
    human = [1.0] * pp + [0.0] * pf + [1.0] * fp + [0.0] * ff
    bias, low, high = paired_difference(judge, human, confidence)
    false_pass_high = clopper_pearson(pf, pf + ff, confidence)[1]
    met = -max_bias <= low and high <= max_bias and false_pass_high <= max_false_pass
    return {"bias": bias, "bias_bounds": [low, high], "false_pass_high": false_pass_high, "met": bool(met)}
