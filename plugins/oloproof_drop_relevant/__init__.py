"""The ``drop-relevant`` intervention: a case's recorded context without its relevant passages
(``expected.relevant``), beside a control that regenerates from the whole context. A case that
still passes without its evidence answered from elsewhere (or from the model's own knowledge).

A case without relevance labels is missing from this experiment (``no_relevance_labels``); one
whose context held no relevant passage is regenerated from the same context.
"""

from __future__ import annotations

from oloproof import CaseMissing, Perturbation, hookimpl, is_relevant, relevant_units, renumbered


class DropRelevant(Perturbation):
    """Regenerate from the recorded context with every relevant passage taken out."""

    name = "drop-relevant"
    label = "drop relevant"

    def __init__(self, options=None):
        pass

    def perturb(self, case, context):
        if relevant_units(case) is None:
            raise CaseMissing("no_relevance_labels: the case has no expected.relevant to drop")
        return renumbered([i for i in context.items if not is_relevant(case, i)], "relevant_dropped")


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("drop-relevant", DropRelevant)
