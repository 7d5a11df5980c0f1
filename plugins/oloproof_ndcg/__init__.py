"""The ``ndcg`` evaluator: normalised discounted cumulative gain of the first k retrieved.

DCG@k = sum over ranks r = 1..k of gain(grade of the unit at r) / log2(r + 1), divided by the
ideal DCG@k: the case's labelled grades sorted from highest, cut at k. ``gain: linear`` (the
default, as in trec_eval and ranx) uses the grade itself; ``gain: exponential`` uses 2^grade - 1.
The ranking is the retriever's own order in the last recorded ``retrieval/v1``; scores never
reorder it, and a unit retrieved twice counts once, at its first position.
See docs/retrieval-metrics.md.
"""

from __future__ import annotations

import math

from attrs import field, frozen

from oloproof import AtKEvaluator, AtKOptions, Judgment, hookimpl, one_of

GAINS = ("linear", "exponential")


@frozen(kw_only=True)
class Options(AtKOptions):
    gain: str = field(default="linear", validator=one_of(GAINS))


def discounted_gain(grades: list[float], gain: str) -> float:
    """DCG of grades listed in rank order (rank 1 first)."""
    if gain == "exponential":
        return sum((2.0 ** g - 1.0) / math.log2(r + 1) for r, g in enumerate(grades, 1))
    return sum(g / math.log2(r + 1) for r, g in enumerate(grades, 1))


class Ndcg(AtKEvaluator):
    """Score nDCG@k with graded relevance (a label's ``grade``, 1 when absent)."""

    name = "ndcg"
    metric = "mean"

    def rate(self, top: list[str], relevant: dict[str, float]) -> Judgment:
        gain = self.options.gain
        dcg = discounted_gain([relevant.get(unit, 0.0) for unit in top], gain)
        ideal = discounted_gain(sorted(relevant.values(), reverse=True)[: self.options.k], gain)
        return Judgment.score(dcg / ideal)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("ndcg", Ndcg, options=Options)
