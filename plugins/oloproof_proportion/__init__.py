"""The ``proportion`` metric: pass/fail judgments, with the exact Clopper–Pearson interval.

The estimate is shown rounded to nearest, the bounds rounded outward to 0.1% (lower floored,
upper ceiled), so the printed interval always contains the computed one.
"""

from __future__ import annotations

from collections.abc import Sequence

from oloproof import Judgment, Summary, hookimpl, stats


def counts(judgments: Sequence[Judgment]) -> tuple[list[float], int, int]:
    values = [j.value for j in judgments if j.observed]
    missing = sum(1 for j in judgments if j.status == "missing")
    excluded = sum(1 for j in judgments if j.status == "excluded")
    return values, missing, excluded


class Proportion:
    name = "proportion"

    def interval(self, values: Sequence[float], confidence: float) -> tuple[float, float]:
        return stats.clopper_pearson(int(round(sum(values))), len(values), confidence)

    def summarize(self, judgments: Sequence[Judgment], confidence: float) -> Summary:
        values, missing, excluded = counts(judgments)
        k, n = int(round(sum(values))), len(values)
        tail = f"{missing} missing · {excluded} excluded"
        if n == 0:
            return Summary(metric=self.name, value=None, low=None, high=None, observed=0, missing=missing,
                           excluded=excluded, successes=0, cells=("—", "—", f"0 / 0 observed · {tail}"))
        low, high = self.interval(values, confidence)
        cells = (f"{100 * k / n:.1f}%",
                 f"[{stats.floor_to(100 * low, 1):.1f}%, {stats.ceil_to(100 * high, 1):.1f}%]",
                 f"{k} / {n} observed · {tail}")
        return Summary(metric=self.name, value=k / n, low=low, high=high, observed=n, missing=missing,
                       excluded=excluded, successes=k, cells=cells)


@hookimpl
def oloproof_register_metrics(registry):
    registry.add("proportion", Proportion)
