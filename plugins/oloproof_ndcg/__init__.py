"""The ``ndcg`` evaluator: normalised discounted cumulative gain of the first k retrieved.

DCG@k = sum over ranks r = 1..k of gain(grade of the unit at r) / log2(r + 1), divided by the
ideal DCG@k: the case's labelled grades sorted from highest, cut at k. ``gain: linear`` (the
default, as in trec_eval and ranx) uses the grade itself; ``gain: exponential`` uses 2^grade - 1.
The ranking is the retriever's own order in the last recorded ``retrieval/v1``; scores never
reorder it, and a unit retrieved twice counts once, at its first position.
See docs/retrieval-metrics.md.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from attrs import field, frozen

from oloproof import ConfigError, Judgment, hookimpl, latest, ranked_units, relevant_units

UNITS = ("doc", "chunk")
GAINS = ("linear", "exponential")


def _check_k(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"k must be a whole number >= 1, got {value!r}",
                          fix="write k: 1 or more, e.g. k: 5 to look at the first five retrieved")


def _check_choice(choices: tuple[str, ...]) -> Any:
    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value not in choices:
            close = [c for c in choices if str(value) and c.startswith(str(value))] or \
                difflib.get_close_matches(str(value), choices, n=1)
            raise ConfigError(f"{attribute.name} must be {' or '.join(choices)}, got {value!r}",
                              fix=f"write {attribute.name}: {close[0] if close else choices[0]}")
    return check


@frozen(kw_only=True)
class Options:
    k: int = field(validator=_check_k)
    criterion: str | None = None  # None: ndcg_at_{k}
    relevance_unit: str = field(default="doc", validator=_check_choice(UNITS))
    gain: str = field(default="linear", validator=_check_choice(GAINS))


def discounted_gain(grades: list[float], gain: str) -> float:
    """DCG of grades listed in rank order (rank 1 first)."""
    if gain == "exponential":
        return sum((2.0 ** g - 1.0) / math.log2(r + 1) for r, g in enumerate(grades, 1))
    return sum(g / math.log2(r + 1) for r, g in enumerate(grades, 1))


@frozen
class Ndcg:
    """Score nDCG@k with graded relevance (a label's ``grade``, 1 when absent)."""

    options: Options
    metric = "mean"
    reads = ("retrieval/v1",)

    @property
    def criterion(self) -> str:
        return self.options.criterion or f"ndcg_at_{self.options.k}"

    def exclude(self, case: Any) -> str | None:
        """Cases with no unit labelled relevant (grade > 0) are outside this criterion."""
        return None if relevant_units(case, self.options.relevance_unit) else "no_relevance_labels"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        unit, k, gain = self.options.relevance_unit, self.options.k, self.options.gain
        relevant = relevant_units(case, unit)
        if not relevant:
            return Judgment.excluded("no_relevance_labels")
        retrieval = latest(execution, "retrieval/v1")
        if retrieval is None:
            return Judgment.missing("no_retrieval_recorded")
        top = ranked_units(retrieval, unit)[:k]
        dcg = discounted_gain([relevant.get(name, 0.0) for name in top], gain)
        ideal = discounted_gain(sorted(relevant.values(), reverse=True)[:k], gain)
        return Judgment.score(dcg / ideal)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("ndcg", Ndcg, options=Options)
