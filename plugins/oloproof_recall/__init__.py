"""The ``recall`` evaluator: the share of the case's relevant units among the first k retrieved.

With one relevant unit a case the value is 0 or 1 and the criterion reads as a proportion; with
several it is graded (the ``fraction`` metric decides). See docs/retrieval-metrics.md.
"""

from __future__ import annotations

from oloproof import AtKEvaluator, AtKOptions, Judgment, hookimpl

Options = AtKOptions  # k, criterion, relevance_unit


class Recall(AtKEvaluator):
    """The share of the case's relevant units (grade > 0) found among the first ``k`` ranked units."""

    name = "recall"
    metric = "fraction"

    def rate(self, top: list[str], relevant: dict[str, float]) -> Judgment:
        found = sum(1 for unit in top if unit in relevant)
        value = found / len(relevant)
        if value in (0.0, 1.0):
            return Judgment.of(value == 1.0, None if value else "no_relevant_in_top_k", found=found,
                               relevant=len(relevant))
        return Judgment.score(value, found=found, relevant=len(relevant))


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("recall", Recall, options=Options)
