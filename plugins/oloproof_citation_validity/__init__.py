"""The ``citation_validity`` evaluator: every cited id names a passage of the context given to the model.

A cited id is valid when it equals, for some item of the last recorded ``context/v1`` (the items
given to the model, never the dropped ones), its ``doc_id``, its ``doc_id#chunk_id``, or its
``chunk_id``. An answer that cites nothing passes, unless ``require_citations: true``.
See docs/retrieval-metrics.md.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import Judgment, context_names, hookimpl, latest


@frozen(kw_only=True)
class Options:
    criterion: str | None = None  # None: citations_valid
    require_citations: bool = False


@frozen
class CitationValidity:
    """Pass when every cited id names an item of the context; citing nothing passes unless required."""

    options: Options
    metric = "proportion"
    cached = False  # in-process and deterministic: made again for less than a cache row costs
    reads = ("citations/v1", "context/v1")

    @property
    def criterion(self) -> str:
        return self.options.criterion or "citations_valid"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        citations = latest(execution, "citations/v1")
        if citations is None:
            return Judgment.missing("no_citations_recorded")
        context = latest(execution, "context/v1")
        if context is None:
            return Judgment.missing("no_context_recorded")
        cited = list(citations.get("ids", ()))
        if not cited:
            if self.options.require_citations:
                return Judgment.failed("no_citations")
            return Judgment.passed("no_citations")
        names = context_names(context)
        invalid = [cited_id for cited_id in cited if cited_id not in names]
        if invalid:
            return Judgment.failed("cites_outside_context", invalid=invalid)
        return Judgment.passed()


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("citation_validity", CitationValidity, options=Options)
