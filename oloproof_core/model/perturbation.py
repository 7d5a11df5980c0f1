"""A base for perturbation interventions: change the context a case's run recorded, generate again.

A perturbation (distractors, a shuffled order, the relevant passages dropped, truncated passages)
is an experiment beside a control: both regenerate from the context the run recorded for the
case, the intervention after :meth:`Perturbation.perturb` changed it, the control unchanged. Any
system that can generate from a given context takes them: a staged system (``generate_with``),
and a service that declares where its request takes a context (``system.http.interventions``).
"""

from __future__ import annotations

import abc
import hashlib
import random
from typing import Any

from oloproof_core.model.errors import ArtifactError, CaseMissing
from oloproof_core.model.artifacts import Context, ContextItem, Passage
from oloproof_core.model.records import Case
from oloproof_core.model.retrieval import relevant_units, unit_key, whole_documents


def recorded_context(case: Case, record: dict) -> Context:
    """The context the run recorded for ``case`` (its latest ``context/v1``), as a Context. A case
    whose run recorded none, or recorded passages without their text, cannot be perturbed: it is
    missing from the experiment and its control alike (``CaseMissing``)."""
    recorded = (record.get("artifacts") or {}).get("context/v1")
    if not recorded:
        raise CaseMissing("no_recorded_context: the run recorded no context/v1 for this case to perturb")
    data = recorded[-1]
    items = []
    for i, item in enumerate(data.get("items", ())):
        if not isinstance(item.get("text"), str):
            raise CaseMissing(f"no_recorded_context: context item {i} ({item.get('doc_id')}) has no text")
        items.append(ContextItem(doc_id=item["doc_id"], position=item.get("position") or i + 1,
                                 tokens=item.get("tokens"), text=item["text"], chunk_id=item.get("chunk_id")))
    return Context(items=tuple(items), token_budget=data.get("token_budget"), source=data.get("source") or "retrieval")


def renumbered(items: list[ContextItem] | tuple[ContextItem, ...], source: str) -> Context:
    """A perturbed context: the items in their new order, positions counted again from 1."""
    from attrs import evolve

    return Context(items=tuple(evolve(item, position=i) for i, item in enumerate(items, 1)), source=source)


def seeded(case: Case, seed: int, salt: str) -> random.Random:
    """A random generator fixed by the case, the seed and the perturbation: the same case gets the
    same perturbation in every trial, process and executor."""
    key = hashlib.sha256(f"{salt}\0{seed}\0{case.id}".encode()).digest()
    return random.Random(int.from_bytes(key[:8], "big"))


def is_relevant(case: Case, item: dict | ContextItem) -> bool:
    """Whether a passage is one of the case's relevant units (a label with a chunk_id matches that
    chunk only; one without matches its whole document)."""
    units = relevant_units(case, "chunk") or {}
    data = item if isinstance(item, dict) else {"doc_id": item.doc_id, "chunk_id": item.chunk_id}
    return unit_key(data, "chunk", whole_documents(case)) in units


class Perturbation(abc.ABC):
    """Regenerate from the run's recorded context, changed by :meth:`perturb`; its control
    regenerates from the same context unchanged. Subclasses set ``name`` and ``label`` and define
    :meth:`perturb`; ``prepare`` may read the run's records first (distractors do)."""

    name = "perturbation"
    label = "perturbation"
    labels_by_recovery = False  # carries the labels of the run's gold-context diagnosis forward
    control_label = "replay control"

    def supports(self, system: Any) -> bool:
        accepts = getattr(system, "accepts", None)  # a service says whether its request takes a context
        return callable(getattr(system, "generate_with", None)) and (accepts is None or accepts("context"))

    def check(self, system: Any) -> None:
        """Options are checked by their Options class; nothing depends on the system."""
        return None

    @abc.abstractmethod
    def perturb(self, case: Case, context: Context) -> Context:
        """The recorded ``context``, changed."""

    def apply(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        changed = self.perturb(case, recorded_context(case, record))
        if not isinstance(changed, Context):
            raise ArtifactError(f"{self.name}: perturb returned {type(changed).__name__}, not a Context")
        count = getattr(system, "tokens", None)  # a staged system's own count_tokens, for what changed
        if callable(count):
            from attrs import evolve

            changed = evolve(changed, items=tuple(
                item if item.tokens is not None else evolve(item, tokens=count(
                    Passage(doc_id=item.doc_id, text=item.text, chunk_id=item.chunk_id))) for item in changed.items))
        return system.generate_with(case, changed, recorder)

    def control(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.generate_with(case, recorded_context(case, record), recorder)
