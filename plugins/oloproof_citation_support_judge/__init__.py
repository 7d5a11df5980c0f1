"""The ``citation_support_judge`` evaluator: an LLM judges whether each passage the answer cites
(the last recorded ``citations/v1``) supports the statement that cites it, reading the passages'
text from the context given to the model (the last ``context/v1``).

An answer that cites nothing is excluded (``citation_validity`` with ``require_citations: true``
fails it); a cited id that names no passage of the context fails without asking the judge
(``cites_outside_context``). Ids match as in ``citation_validity``: ``doc_id``,
``doc_id#chunk_id`` or ``chunk_id``. The prompt is a versioned pair of files of this package; its
version and text, the provider and the model are the judge's identity. docs/judges.md.
"""

from __future__ import annotations

from typing import Any

from oloproof import Judgment, JudgeOptions, LLMJudge, context_names, hookimpl, latest, text_of

Options = JudgeOptions  # provider, model, provider_options, criterion, prompt, question_field, answer_field


class CitationSupportJudge(LLMJudge):
    """Pass when the judge finds each cited passage supports the statement citing it."""

    type_name, family, default_criterion = "citation_support_judge", "citation_support", "citations_supported"
    prompts = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned
    reads = ("citations/v1", "context/v1")

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        citations = latest(execution, "citations/v1")
        if citations is None:
            return Judgment.missing("no_citations_recorded")
        context = latest(execution, "context/v1")
        if context is None:
            return Judgment.missing("no_context_recorded")
        cited = list(dict.fromkeys(citations.get("ids", ())))
        if not cited:
            return Judgment.excluded("no_citations")
        names = context_names(context)
        outside = [cited_id for cited_id in cited if cited_id not in names]
        if outside:
            return Judgment.failed("cites_outside_context", invalid=outside)
        if not all(names[cited_id].get("text") for cited_id in cited):
            return Judgment.missing("context_without_text")
        answer = self.answer(execution)
        if answer is None:
            return Judgment.failed("field_absent")
        shown = "\n\n".join(f"[{cited_id}] {names[cited_id]['text']}" for cited_id in cited)
        return self.ask({"cited": cited}, question=self.question(case), answer=text_of(answer), cited=shown)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("citation_support_judge", CitationSupportJudge, options=Options)
