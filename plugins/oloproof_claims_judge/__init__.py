"""The ``claims_judge`` evaluator: claim-level grounding. An LLM splits the answer into claims and
judges each against the context given to the model (the last recorded ``context/v1``); the
judgment records every claim with its verdict and the passage that supports it.

The criterion is the share of supported claims (a case passes when every claim is supported), or
pass/fail at ``threshold``. An answer that makes no claim (an abstention) passes (``no_claims``).
The prompts are versioned files of this package (``prompts/v1.split.*`` and ``prompts/v1.*``);
they, the provider and the model are the judge's identity. docs/judges.md.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import ClaimJudge, ClaimOptions, Judgment, hookimpl, text_of


@frozen(kw_only=True)
class Options(ClaimOptions):
    criterion: str | None = None  # None: claims_supported


class ClaimsJudge(ClaimJudge):
    """Split the answer into claims; judge each against the context passages."""

    type_name, family, default_criterion = "claims_judge", "claims", "claims_supported"
    prompts = ("v1",)  # every version ever shipped stays, so a validated judge can stay pinned
    claimed_words = "claims of the answer"

    def claimed(self, case: Any, execution: Any) -> str | Judgment:
        answer = self.answer(execution)
        if answer is None:
            return Judgment.failed("field_absent")
        return text_of(answer)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("claims_judge", ClaimsJudge, options=Options)
