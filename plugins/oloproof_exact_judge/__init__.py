"""The ``exact_judge`` evaluator: an LLM judges whether the answer means the same as the case's
expected answer (``expected.answer``), for answers whose wording varies.

Cases that declare no expected answer are excluded. The prompt is a versioned pair of files of
this package; its version and text, the provider and the model are the judge's identity, so
changing any of them misses the judgment cache and needs a new validation. docs/judges.md.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import Judgment, JudgeOptions, LLMJudge, hookimpl, select, text_of


@frozen(kw_only=True)
class Options(JudgeOptions):
    expected_field: str = "answer"  # a key of the case's expected


class ExactJudge(LLMJudge):
    """Pass when the judge finds the answer equivalent to the expected answer."""

    type_name, family, default_criterion = "exact_judge", "exact", "answer_equivalent"
    prompts = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned

    def exclude(self, case: Any) -> str | None:
        """Cases that declare no expected answer are outside this criterion."""
        return None if select(case.expected, self.options.expected_field) is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        answer = self.answer(execution)
        if answer is None:
            return Judgment.failed("field_absent")
        return self.ask(question=self.question(case), answer=text_of(answer),
                        expected=text_of(select(case.expected, self.options.expected_field)))


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("exact_judge", ExactJudge, options=Options)
