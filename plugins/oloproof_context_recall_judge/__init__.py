"""The ``context_recall_judge`` evaluator: context recall against a reference answer. An LLM splits
the case's expected answer into claims and judges whether the assembled context (the last recorded
``context/v1``) supports each: "3 of 4 claims of the reference supported".

The criterion is the share of supported claims (every claim supported passes), or pass/fail at
``threshold``. A case without a reference answer is excluded (``no_reference_answer``). The
prompts are versioned files of this package; they, the provider and the model are the judge's
identity. docs/judges.md.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import ClaimJudge, ClaimOptions, Judgment, hookimpl, select, text_of


@frozen(kw_only=True)
class Options(ClaimOptions):
    expected_field: str | None = "answer"  # a key of the case's expected: the reference answer
    criterion: str | None = None  # None: context_recall


class ContextRecallJudge(ClaimJudge):
    """Split the reference answer into claims; judge whether the context supports each."""

    type_name, family, default_criterion = "context_recall_judge", "context_recall", "context_recall"
    prompts = ("v1",)
    claimed_words = "claims of the reference answer"

    def exclude(self, case: Any) -> str | None:
        return None if self.reference(case) else "no_reference_answer"

    def reference(self, case: Any) -> str | None:
        found = select(case.expected, self.options.expected_field)
        text = None if found is None else text_of(found)
        return text if text and text.strip() else None

    def claimed(self, case: Any, execution: Any) -> str | Judgment:
        text = self.reference(case)
        return text if text is not None else Judgment.excluded("no_reference_answer")

    def no_claims(self) -> Judgment:
        return Judgment.excluded("no_claims_in_reference")


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("context_recall_judge", ContextRecallJudge, options=Options)
