"""The ``contains`` evaluator: the output's field contains the expected text (case-insensitive)."""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import Judgment, hookimpl, select


@frozen(kw_only=True)
class Options:
    criterion: str
    field: str | None = None  # a key of the output object; None: the whole output
    expected_field: str = "answer"  # a key of the case's `expected`
    case_sensitive: bool = False



@frozen
class Contains:
    options: Options
    metric = "proportion"

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def exclude(self, case: Any) -> str | None:
        """Cases that declare no expected value are outside this criterion."""
        return None if select(case.expected, self.options.expected_field) is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        want = str(select(case.expected, self.options.expected_field))
        got = select(execution.output, self.options.field)
        if got is None:
            return Judgment.failed("field_absent")
        got = got if isinstance(got, str) else str(got)
        if not self.options.case_sensitive:
            want, got = want.casefold(), got.casefold()
        return Judgment.of(want in got)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("contains", Contains, options=Options)
