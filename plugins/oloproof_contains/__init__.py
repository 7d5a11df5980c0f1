"""The ``contains`` evaluator: the output's field contains the expected text (case-insensitive).

The expected value is a string, or a list of acceptable strings (any one of them contained
passes). Any other expected value is a configuration error naming the case's line.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import Judgment, acceptable_texts, hookimpl, select


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
    cached = False  # in-process and deterministic: made again for less than a cache row costs
    reads = ()  # the output alone: no artifact (the judgment cache key leaves the others out)

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def exclude(self, case: Any) -> str | None:
        """Cases that declare no expected value are outside this criterion."""
        return None if acceptable_texts(case, self.options.expected_field, "contains") is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        wanted = acceptable_texts(case, self.options.expected_field, "contains") or []
        got = select(execution.output, self.options.field)
        if got is None:
            return Judgment.failed("field_absent", field=self.options.field)
        got = got if isinstance(got, str) else str(got)
        expected = wanted
        if not self.options.case_sensitive:
            wanted, got = [w.casefold() for w in wanted], got.casefold()
        if any(w in got for w in wanted):
            return Judgment.passed()
        return Judgment.failed("expected_text_not_found", field=self.options.field, expected=expected)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("contains", Contains, options=Options)
