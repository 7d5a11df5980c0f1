"""The ``distractors`` intervention: passages the run retrieved for other questions, injected into
a case's recorded context at a chosen position, beside a control that regenerates from the same
context unchanged. Its paired difference is a noise sensitivity with an interval, not a score.

``--option count=N`` passages (1 by default) go in at ``--option position=first|last|N`` (first by
default; N counts from 1). A case's distractors are drawn, with a generator fixed by the case and
``--option seed=S``, from the other cases' recorded retrievals, leaving out the case's own relevant
passages and what its context already holds.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve, field, frozen

from oloproof import CaseMissing, ConfigError, ContextItem, Perturbation, hookimpl, is_relevant, renumbered, seeded

POOL_LIMIT = 500  # passages kept from the run's retrievals: plenty to draw a few from, bounded memory


def _position(instance: Any, attribute: Any, value: Any) -> None:
    if value in ("first", "last") or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return
    raise ConfigError(f"position must be first, last or a whole number >= 1, got {value!r}",
                      fix="pass --option position=first (or last, or 2)", key="position")


def _count(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"count must be a whole number >= 1, got {value!r}", fix="pass --option count=1", key="count")


@frozen(kw_only=True)
class Options:
    count: int = field(default=1, validator=_count)
    position: Any = field(default="first", validator=_position)  # first, last, or a position from 1
    seed: int = 0
    pool: list[dict[str, str]] | None = None  # filled from the run's retrievals (prepare), not given by hand


class Distractors(Perturbation):
    """Inject passages retrieved for other questions into the recorded context."""

    name = "distractors"

    def __init__(self, options: Options):
        self.options = options
        self.label = f"distractors {options.count} at {options.position}"

    def prepare(self, records: Any) -> dict:
        """The pool: every passage with text the run's recorded retrievals hold, once each, with
        the case it was retrieved for (so that a case never gets its own)."""
        pool, seen = [], set()
        for record in records:
            retrievals = (record.get("artifacts") or {}).get("retrieval/v1") or ()
            for passage in (retrievals[-1].get("candidates", ()) if retrievals else ()):
                key = (passage.get("doc_id"), passage.get("chunk_id"))
                if key in seen or not isinstance(passage.get("text"), str) or len(pool) >= POOL_LIMIT:
                    continue
                seen.add(key)
                pool.append({"doc_id": passage["doc_id"], "text": passage["text"], "case": record["id"],
                             **({"chunk_id": str(passage["chunk_id"])} if passage.get("chunk_id") else {})})
        self.options = evolve(self.options, pool=pool)
        return {"pool": pool}  # an executor's workers build the intervention again with it

    def perturb(self, case: Any, context: Any) -> Any:
        held = {(i.doc_id, i.chunk_id) for i in context.items}
        choices = [p for p in self.options.pool or () if p["case"] != case.id and not is_relevant(case, p)
                   and (p["doc_id"], p.get("chunk_id")) not in held]
        if not choices:
            raise CaseMissing("no_distractor: the run retrieved no passage for another question that this case "
                              "neither holds nor labels relevant")
        drawn = seeded(case, self.options.seed, self.name).sample(choices, min(self.options.count, len(choices)))
        injected = [ContextItem(doc_id=p["doc_id"], position=1, text=p["text"], chunk_id=p.get("chunk_id"))
                    for p in drawn]
        items = list(context.items)
        where = {"first": 0, "last": len(items)}.get(self.options.position)
        where = min(self.options.position - 1, len(items)) if where is None else where
        return renumbered(items[:where] + injected + items[where:], "distractors")


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("distractors", Distractors, options=Options)
