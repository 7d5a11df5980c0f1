"""The ``exact`` evaluator: the output's field equals the expected value."""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import Judgment, hookimpl, select


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

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def exclude(self, case: Any) -> str | None:
        return None if select(case.expected, self.options.expected_field) is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        want = select(case.expected, self.options.expected_field)
        got = select(execution.output, self.options.field)
        if isinstance(want, str) and isinstance(got, str):
            if self.options.strip:
                want, got = want.strip(), got.strip()
            if self.options.ignore_case:
                want, got = want.casefold(), got.casefold()
        return Judgment.of(want == got)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("exact", Exact, options=Options)
