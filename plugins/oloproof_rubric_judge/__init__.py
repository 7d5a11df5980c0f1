"""The ``rubric_judge`` evaluator: an LLM judges whether the answer satisfies a rubric written in
the suite (``rubric: "The answer tells the customer how long a refund takes."``).

With ``expected_field`` set, the case's expected value at that key is shown to the judge as a
reference answer, and cases without it are excluded. The prompt is a versioned pair of files of
this package; its version and text, the provider and the model are the judge's identity, and the
rubric is one of its options, so editing the rubric misses the cache too. With ``scope:
conversation`` it judges a conversation's whole transcript on its last turn. docs/judges.md.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import ConfigError, Judgment, JudgeOptions, LLMJudge, hookimpl, select, text_of


@frozen(kw_only=True)
class Options(JudgeOptions):
    criterion: str  # a rubric names its own criterion
    rubric: str  # what a passing answer does, in plain words
    expected_field: str | None = None  # a key of the case's expected: shown as a reference answer


class RubricJudge(LLMJudge):
    """Pass when the judge finds the answer satisfies the suite's rubric."""

    type_name, family = "rubric_judge", "rubric"
    prompts = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned
    transcripts = ("transcript-v1",)  # scope: conversation, the whole transcript (docs/conversations.md)

    def __init__(self, options: Options):
        if not options.rubric.strip():
            raise ConfigError("evaluator 'rubric_judge' has an empty rubric", fix="write what a passing answer does")
        super().__init__(options)

    def exclude(self, case: Any) -> str | None:
        """With a reference answer asked for, cases that declare none are outside this criterion."""
        if self.options.expected_field is None or select(case.expected, self.options.expected_field) is not None:
            return None
        return "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        answer = self.answer(execution)
        if answer is None:
            return Judgment.failed("field_absent")
        reference = ""
        if self.options.expected_field is not None:
            reference = f"\nReference answer:\n{text_of(select(case.expected, self.options.expected_field))}\n"
        if self.scope == "conversation":  # the last turn of a conversation: every turn, this one last
            return self.ask(rubric=self.options.rubric.strip(), transcript=self.transcript(case, execution),
                            reference=reference)
        return self.ask(rubric=self.options.rubric.strip(), answer=text_of(answer), question=self.question(case),
                        reference=reference)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("rubric_judge", RubricJudge, options=Options)
