"""The ``gold-context`` intervention: generate with the case's gold passages in place of the
assembled context, beside a control that re-executes the system unchanged.

A failure that passes with the gold passages failed upstream of the model; one that still
fails is the model's. Labels come from recovery first, the recorded positions second.
"""

from __future__ import annotations

from typing import Any

from oloproof import Context, ContextItem, hookimpl


class GoldContext:
    """Generate from the case's ``expected.gold_context`` instead of the assembled context."""

    name = "gold-context"
    label = "gold context"
    labels_by_recovery = True  # labels come from this intervention, not carried from another
    control_label = "control"

    def __init__(self, options: Any = None):
        pass

    def supports(self, system: Any) -> bool:
        # a system that takes overrides in its request (an http service) says which it takes
        accepts = getattr(system, "accepts", None)
        return (callable(getattr(system, "generate_with", None)) and callable(getattr(system, "rerun", None))
                and (accepts is None or accepts("context")))

    def check(self, system: Any) -> None:
        """Nothing to check: every staged system can generate from given passages."""

    def apply(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        gold = case.expected["gold_context"]
        context = Context(items=tuple(ContextItem(doc_id=g["doc_id"], position=i, text=g.get("text"),
                                                  chunk_id=g.get("chunk_id"))
                                      for i, g in enumerate(gold, 1)), source="gold_context")
        return system.generate_with(case, context, recorder)

    def control(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.rerun(case, recorder)


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("gold-context", GoldContext)
