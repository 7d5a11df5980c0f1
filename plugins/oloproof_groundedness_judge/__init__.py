"""The ``groundedness_judge`` evaluator: an LLM judges whether every claim of the answer is
supported by the context given to the model (the last recorded ``context/v1``).

The prompt is a versioned pair of files of this package (``prompts/v1.system.txt``,
``prompts/v1.user.txt``). The prompt version and text, the provider and the model are the judge's
identity: changing any of them misses the judgment cache and needs a new validation before the
criterion may gate. docs/judges.md.
"""

from __future__ import annotations

from typing import Any

from oloproof import Judgment, JudgeOptions, LLMJudge, hookimpl, latest, text_of, unit_key

Options = JudgeOptions  # provider, model, provider_options, criterion, prompt, question_field, answer_field


class GroundednessJudge(LLMJudge):
    """Pass when the judge finds every claim of the answer in the passages given to the model."""

    type_name, family, default_criterion = "groundedness_judge", "groundedness", "grounded"
    prompts = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned
    reads = ("context/v1",)

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        context = latest(execution, "context/v1")
        if context is None:
            return Judgment.missing("no_context_recorded")
        answer = self.answer(execution)
        if answer is None:
            return Judgment.failed("field_absent")
        items = list(context.get("items", ()))
        if items and not any(item.get("text") for item in items):
            return Judgment.missing("context_without_text")
        passages = "\n\n".join(f"[{i}] ({unit_key(item, 'chunk')}) {item.get('text') or '(no text recorded)'}"
                                for i, item in enumerate(items, 1))
        return self.ask(question=self.question(case), context=passages or "(no passages)", answer=text_of(answer))


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("groundedness_judge", GroundednessJudge, options=Options)
