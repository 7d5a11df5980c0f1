"""Reading relevance labels and recorded retrievals, for retrieval evaluators (builtin or not)."""

from __future__ import annotations

import abc

from collections.abc import Collection, Mapping
from typing import Any

from oloproof_core.model.errors import ConfigError
from attrs import field, frozen

from oloproof_core.model.records import Case, Execution, Judgment

UNITS = ("doc", "chunk")
# set in a case's expected (with judged labels as ``relevant``) when a relevance judge labelled it:
# the judge's criterion (relevance: {source: judge}); the metrics then mark their judgments judged
JUDGED_BY = "relevant_judged_by"


def unit_key(item: Mapping, unit: str, whole_docs: Collection[str] = ()) -> str:
    """The unit a passage or label stands for: its doc_id, or ``doc_id#chunk_id`` for chunks.

    Under ``chunk``, an item without a chunk_id, or of a document in ``whole_docs`` (the documents
    a case labels without a chunk_id: :func:`whole_documents`), stands for its whole document.
    """
    if unit == "chunk" and item.get("chunk_id") is not None and str(item["doc_id"]) not in whole_docs:
        return f"{item['doc_id']}#{item['chunk_id']}"
    return str(item["doc_id"])


def _labels(case: Case) -> list | None:
    labels = case.expected.get("relevant")
    if labels is None:
        return None
    where = f"{case.source}: $.expected.relevant" if case.source else "$.expected.relevant"
    if not isinstance(labels, list):
        raise ConfigError(f"expected a list of {{doc_id, chunk_id?, grade?}}, got {labels!r}", where=where,
                          fix='write "relevant": [{"doc_id": "kb-01"}]')
    for i, label in enumerate(labels):
        if not isinstance(label, dict) or not isinstance(label.get("doc_id"), str) or not label["doc_id"]:
            raise ConfigError(f"item {i} needs a doc_id string, got {label!r}", where=where,
                              fix='write {"doc_id": "kb-01"}')
        grade = label.get("grade", 1)
        if isinstance(grade, bool) or not isinstance(grade, (int, float)) or grade < 0:
            raise ConfigError(f"item {i}: grade must be a number >= 0, got {grade!r}", where=where,
                              fix="write a grade such as 1 or 2")
    return labels


def judged_case(case: Case, judgments: Mapping[str, Any], judge: str | None) -> Case:
    """``case`` with the labels of the relevance judge ``judge`` (its criterion; ``relevance:
    {source: judge}``) as ``expected.relevant`` and marked :data:`JUDGED_BY`, when it has no human
    labels and the judge gave labels (a pass or a fail); else ``case`` itself. ``judgments`` maps
    criteria to judgments, as objects or as stored data."""
    if judge is None or case.expected.get("relevant") is not None:
        return case
    verdict = judgments.get(judge)
    data = verdict if isinstance(verdict, Mapping) or verdict is None else verdict.to_data()
    if not data or data.get("status") not in ("pass", "fail"):
        return case
    import attrs

    labels = list((data.get("detail") or {}).get("labels", ()))
    return attrs.evolve(case, expected={**case.expected, "relevant": labels, JUDGED_BY: judge})


def whole_documents(case: Case) -> frozenset[str]:
    """The documents ``expected.relevant`` labels without a chunk_id: under ``relevance_unit:
    chunk`` each of them is one unit, matched by any of its chunks (the fallback to doc)."""
    return frozenset(str(label["doc_id"]) for label in _labels(case) or () if label.get("chunk_id") is None)


def relevant_units(case: Case, unit: str = "doc") -> dict[str, float] | None:
    """``expected.relevant`` as {unit: grade} (grade defaults to 1), or None when unlabelled.

    With ``unit="doc"`` several labelled chunks of one document count as one unit, at their
    highest grade. With ``unit="chunk"`` each labelled chunk is a unit, and a document labelled
    without a chunk_id is one unit as a whole (its chunk labels, if any, merge into it).
    """
    labels = _labels(case)
    if labels is None:
        return None
    whole = whole_documents(case) if unit == "chunk" else frozenset()
    units: dict[str, float] = {}
    for label in labels:
        key = unit_key(label, unit, whole)
        units[key] = max(units.get(key, 0.0), float(label.get("grade", 1)))
    return {k: g for k, g in units.items() if g > 0} if units else {}


def latest(execution: Execution, artifact_type: str) -> Mapping[str, Any] | None:
    """The last record of ``artifact_type`` the system recorded for this case, or None."""
    records = execution.artifacts.get(artifact_type)
    return records[-1] if records else None


def retrieval_data(retrieval: Any) -> dict:
    """A :class:`Retrieval` in its recorded ``retrieval/v1`` form (unset passage fields left out)."""
    return {"query": retrieval.query, "depth": retrieval.depth,
            "candidates": [{k: v for k, v in (("doc_id", p.doc_id), ("score", p.score), ("text", p.text),
                                              ("chunk_id", p.chunk_id)) if v is not None}
                           for p in retrieval.candidates]}


def retrieval_from_data(data: Mapping[str, Any]) -> Any:
    """The :class:`Retrieval` of a recorded (already validated) ``retrieval/v1`` record."""
    from oloproof_core.model.artifacts import Passage, Retrieval

    return Retrieval(query=data.get("query"), depth=data["depth"],
                     candidates=tuple(Passage(**c) for c in data.get("candidates", ())))


def context_names(context: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every id by which a citation may name an item of a recorded ``context/v1`` (its doc_id,
    ``doc_id#chunk_id`` and its chunk_id), and that item; the first item wins a shared name."""
    names: dict[str, Mapping[str, Any]] = {}
    for item in context.get("items", ()):
        names.setdefault(str(item["doc_id"]), item)
        if item.get("chunk_id") is not None:
            names.setdefault(f"{item['doc_id']}#{item['chunk_id']}", item)
            names.setdefault(str(item["chunk_id"]), item)
    return names


def ranked_units(retrieval: Mapping[str, Any], unit: str = "doc", whole_docs: Collection[str] = ()) -> list[str]:
    """The units of a recorded ``retrieval/v1`` in the retriever's order, each once (first kept):
    the ranking every position is counted in (the at-k metrics, the ``relevant_position`` slice
    and diagnose)."""
    seen: dict[str, None] = {}
    for passage in retrieval.get("candidates", ()):
        seen.setdefault(unit_key(passage, unit, whole_docs), None)
    return list(seen)


# -- what a run observed about a case's relevant evidence --------------------------------------

EVIDENCE = {  # state -> how it reads; the states a case can be in, nearest to the model first
    "in_context": "in context",
    "dropped_for_token_budget": "dropped for token_budget",
    "beyond_top_k": "ranked beyond top_k",
    "not_retrieved": "not retrieved",
    "not_in_context": "retrieved, not in the context",
    "retrieved": "retrieved (no context recorded)",
    "unknown": "unknown (no relevance labels, or nothing recorded)",
}


def evidence_words(state: str) -> str:
    """How an evidence state reads (``dropped for token_budget``)."""
    if state in EVIDENCE:
        return EVIDENCE[state]
    return state.replace("dropped_for_", "dropped for ", 1)


@frozen(kw_only=True)
class Evidence:
    """Where a case's relevant evidence was in one execution.

    ``position`` is the rank, from 1, of the first relevant unit among the deduplicated units of
    the recorded retrieval (the rank the at-k metrics use); None when none was retrieved;
    ``"unknown"`` without labels or a recorded retrieval. ``state`` is read from the recorded
    ``context/v1``: ``in_context`` when a relevant unit is among its items, else
    ``dropped_for_<reason>`` for the nearest reason a relevant unit was dropped for
    (``dropped_for_token_budget``), ``beyond_top_k`` when every relevant unit retrieved was cut at
    top_k, ``not_retrieved``, or ``unknown``.
    """

    position: int | None | str
    state: str
    unit: str = "doc"


def observe(case: Case, execution: Execution | None, unit: str = "doc", top_k: int | None = None,
            min_grade: float | None = None) -> Evidence:
    """What ``execution`` recorded about the relevant evidence of ``case``, counted in ``unit``.

    ``min_grade`` (``relevance.evidence_min_grade``): only relevant units of at least that grade
    count; a case with none is ``unknown``, as one without labels. A case labelled by a relevance
    judge (:func:`judged_case`) with none is ``not_retrieved``: the judge graded what was retrieved
    (up to its depth) and found nothing relevant there.

    Without a recorded context, a retrieved unit is ``beyond_top_k`` when its first passage lies
    past ``top_k`` (which counts passages), else ``retrieved``.
    """
    relevant = relevant_units(case, unit)
    if relevant and min_grade is not None:
        relevant = {k: g for k, g in relevant.items() if g >= min_grade}
    if execution is None:
        return Evidence(position="unknown", state="unknown", unit=unit)
    if not relevant and case.expected.get(JUDGED_BY) and latest(execution, "retrieval/v1") is not None:
        return Evidence(position=None, state="not_retrieved", unit=unit)
    if not relevant:
        return Evidence(position="unknown", state="unknown", unit=unit)
    whole = whole_documents(case) if unit == "chunk" else frozenset()
    retrieval = latest(execution, "retrieval/v1")
    context = latest(execution, "context/v1")
    in_context = context is not None and any(unit_key(i, unit, whole) in relevant for i in context.get("items", ()))
    if retrieval is None:
        return Evidence(position="unknown", state="in_context" if in_context else "unknown", unit=unit)
    ranked = ranked_units(retrieval, unit, whole)
    position = next((rank for rank, key in enumerate(ranked, 1) if key in relevant), None)
    if position is None:
        return Evidence(position=None, state="in_context" if in_context else "not_retrieved", unit=unit)
    if in_context:
        return Evidence(position=position, state="in_context", unit=unit)
    if context is not None:
        reasons = {str(d.get("reason")) for d in context.get("dropped", ()) if unit_key(d, unit, whole) in relevant}
        others = sorted(r for r in reasons if r != "top_k")
        if others:
            return Evidence(position=position, state=f"dropped_for_{others[0]}", unit=unit)
        if reasons:
            return Evidence(position=position, state="beyond_top_k", unit=unit)
        return Evidence(position=position, state="not_in_context", unit=unit)
    first = next(p for p, c in enumerate(retrieval.get("candidates", ()), 1) if unit_key(c, unit, whole) in relevant)
    if top_k is not None and first > top_k:
        return Evidence(position=position, state="beyond_top_k", unit=unit)
    return Evidence(position=position, state="retrieved", unit=unit)


# -- a base for retrieval evaluators at a cut-off k (hit_rate, recall, mrr, ndcg, and yours) ----


def one_of(choices: tuple[str, ...]) -> Any:
    """An attrs validator: the value is one of ``choices``, else a ConfigError with the closest."""
    import difflib

    def check(instance: Any, attribute: Any, value: Any) -> None:
        if value not in choices:
            close = [c for c in choices if str(value) and c.startswith(str(value))] or \
                difflib.get_close_matches(str(value), choices, n=1)
            raise ConfigError(f"{attribute.name} must be {' or '.join(choices)}, got {value!r}",
                              fix=f"write {attribute.name}: {close[0] if close else choices[0]}", key=attribute.name)

    return check


def _check_k(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"k must be a whole number >= 1, got {value!r}",
                          fix="write k: 1 or more, e.g. k: 5 to look at the first five retrieved", key="k")


@frozen(kw_only=True)
class AtKOptions:
    """The options every retrieval evaluator at k takes; subclass it to add more."""

    k: int = field(validator=_check_k)
    criterion: str | None = None  # None: <name>_at_<k>
    relevance_unit: str = field(default="doc", validator=one_of(UNITS))


class AtKEvaluator(abc.ABC):
    """A retrieval evaluator at a cut-off k: names its criterion ``<name>_at_<k>``, excludes cases
    without relevance labels (``no_relevance_labels``), reads the last recorded ``retrieval/v1``
    (missing ``no_retrieval_recorded`` without one), and scores the retriever's own ranking cut
    at k with :meth:`rate`, which subclasses define."""

    name = "at_k"
    metric = "proportion"
    cached = False  # in-process and deterministic: made again for less than a cache row costs
    reads = ("retrieval/v1",)

    def __init__(self, options: AtKOptions):
        self.options = options

    @property
    def criterion(self) -> str:
        return self.options.criterion or f"{self.name}_at_{self.options.k}"

    def exclude(self, case: Case) -> str | None:
        if case.expected.get(JUDGED_BY):
            return None
        return None if relevant_units(case, self.options.relevance_unit) else "no_relevance_labels"

    def evaluate(self, case: Case, execution: Execution) -> Judgment:
        unit = self.options.relevance_unit
        relevant = relevant_units(case, unit)
        judged = case.expected.get(JUDGED_BY)
        if not relevant and not judged:
            return Judgment.excluded("no_relevance_labels")
        retrieval = latest(execution, "retrieval/v1")
        if retrieval is None:
            return Judgment.missing("no_retrieval_recorded")
        if not relevant:  # the judge found no relevant passage among those retrieved: nothing found
            judgment = (Judgment.of(False, "no_relevant_in_top_k") if self.metric in ("proportion", "fraction")
                        else Judgment.score(0.0))
        else:
            whole = whole_documents(case) if unit == "chunk" else frozenset()
            judgment = self.rate(ranked_units(retrieval, unit, whole)[: self.options.k], relevant)
        if judged:  # every number built on judged labels says so
            judgment = Judgment(status=judgment.status, value=judgment.value, reason=judgment.reason,
                                detail={**(judgment.detail or {}), "judged": str(judged)})
        return judgment

    @abc.abstractmethod
    def rate(self, top: list[str], relevant: dict[str, float]) -> Judgment:
        """The judgment for the first k ranked units ``top`` and the case's {unit: grade}."""


def context_from_prompt(retrieval: Mapping[str, Any], prompt: str, *, source: str = "retrieval") -> dict:
    """The ``context/v1`` a traced LLM call implies: the rule docs/traces.md documents.

    A retrieved candidate is *in the context* when the prompt holds its text (whitespace and case
    aside), or, for a candidate recorded without text, its ``doc_id``; items keep the retrieval's
    order and their rank in it as ``position``. Every other candidate is dropped with the reason
    ``not_in_prompt``. ``retrieval`` is a ``retrieval/v1`` record, ``prompt`` the model's input.
    """
    flat = " ".join(prompt.split()).lower()
    items, dropped = [], []
    for position, passage in enumerate(retrieval.get("candidates", ()), 1):
        text = passage.get("text")
        needle = " ".join(text.split()).lower() if text else str(passage["doc_id"]).lower()
        ident = {"doc_id": passage["doc_id"], "position": position}
        if passage.get("chunk_id") is not None:
            ident["chunk_id"] = passage["chunk_id"]
        if needle and needle in flat:
            items.append({**ident, **({"text": text} if text else {})})
        else:
            dropped.append({**ident, "reason": "not_in_prompt"})
    return {"items": items, "dropped": dropped, "token_budget": None, "source": source}
