"""The ``mrr`` evaluator: 1/rank of the first relevant unit within the first k retrieved, else 0.

Averaged over cases this is the mean reciprocal rank at k. The ranking is the retriever's own
order in the last recorded ``retrieval/v1``; scores never reorder it, and a unit retrieved twice
counts once, at its first position. See docs/retrieval-metrics.md.
"""

from __future__ import annotations

from oloproof import AtKEvaluator, AtKOptions, Judgment, hookimpl

Options = AtKOptions  # k, criterion, relevance_unit


class ReciprocalRank(AtKEvaluator):
    """Score 1/rank of the first relevant unit among the first ``k`` ranked units, 0 if none."""

    name = "mrr"
    metric = "mean"

    def rate(self, top: list[str], relevant: dict[str, float]) -> Judgment:
        rank = next((i for i, unit in enumerate(top, 1) if unit in relevant), None)
        return Judgment.score(1.0 / rank if rank is not None else 0.0, rank=rank)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("mrr", ReciprocalRank, options=Options)
