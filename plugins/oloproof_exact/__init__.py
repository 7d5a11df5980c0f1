"""The ``exact`` evaluator: the output's field equals the expected value.

The expected value is a string, or a list of acceptable strings (equal to any one of them
passes). Any other expected value is a configuration error naming the case's line.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import Judgment, acceptable_texts, hookimpl, select


@frozen(kw_only=True)
class Options:
    criterion: str
    field: str | None = None
    expected_field: str = "answer"
    ignore_case: bool = False
    strip: bool = True


@frozen
class Exact:
    options: Options
    metric = "proportion"
    cached = False  # in-process and deterministic: made again for less than a cache row costs
    reads = ()  # the output alone: no artifact (the judgment cache key leaves the others out)

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def exclude(self, case: Any) -> str | None:
        return None if acceptable_texts(case, self.options.expected_field, "exact") is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        wanted = acceptable_texts(case, self.options.expected_field, "exact") or []
        got = select(execution.output, self.options.field)
        if not isinstance(got, str):
            return Judgment.failed("field_absent" if got is None else "not_text", field=self.options.field)
        expected = wanted
        if self.options.strip:
            wanted, got = [w.strip() for w in wanted], got.strip()
        if self.options.ignore_case:
            wanted, got = [w.casefold() for w in wanted], got.casefold()
        if got in wanted:
            return Judgment.passed()
        return Judgment.failed("not_equal", field=self.options.field, expected=expected)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("exact", Exact, options=Options)
