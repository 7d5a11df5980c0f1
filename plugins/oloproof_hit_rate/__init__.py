"""The ``hit_rate`` evaluator: pass when any relevant unit is among the first k retrieved.

The ranking is the retriever's own order in the last recorded ``retrieval/v1``; scores never
reorder it, a unit retrieved twice counts once (at its first position), and k may exceed the
number retrieved. See docs/retrieval-metrics.md.
"""

from __future__ import annotations

from oloproof import AtKEvaluator, AtKOptions, Judgment, hookimpl

Options = AtKOptions  # k, criterion, relevance_unit


class HitRate(AtKEvaluator):
    """Pass when any of the case's relevant units is among the first ``k`` ranked units."""

    name = "hit_rate"
    metric = "proportion"

    def rate(self, top: list[str], relevant: dict[str, float]) -> Judgment:
        rank = next((i for i, unit in enumerate(top, 1) if unit in relevant), None)
        return Judgment.of(rank is not None, None if rank is not None else "no_relevant_in_top_k", rank=rank)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("hit_rate", HitRate, options=Options)
