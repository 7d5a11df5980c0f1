"""The ``shuffle`` intervention: a case's recorded context in another order, beside a control that
regenerates from it in the recorded order. Its paired difference is a position sensitivity with an
interval, not a score.

The order is drawn with a generator fixed by the case and ``--option seed=S``; a context of two or
more passages always changes order (a draw that keeps it is moved on by one).
"""

from __future__ import annotations

from attrs import frozen

from oloproof import Perturbation, hookimpl, renumbered, seeded


@frozen(kw_only=True)
class Options:
    seed: int = 0


class Shuffle(Perturbation):
    """Regenerate from the recorded context with its passages reordered."""

    name = "shuffle"
    label = "shuffle"

    def __init__(self, options: Options | None):
        self.seed = options.seed if options is not None else 0

    def perturb(self, case, context):
        items = list(context.items)
        order = items[:]
        seeded(case, self.seed, self.name).shuffle(order)
        if len(items) > 1 and order == items:
            order = order[1:] + order[:1]
        return renumbered(order, "shuffled")


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("shuffle", Shuffle, options=Options)
