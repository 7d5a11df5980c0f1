"""The ``exact`` evaluator: the output's field equals the expected value.

The expected value is a string, or a list of acceptable strings (equal to any one of them
passes). Any other expected value is a configuration error naming the case's line.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import ConfigError, Judgment, hookimpl, select


@frozen(kw_only=True)
class Options:
    criterion: str
    field: str | None = None
    expected_field: str = "answer"
    ignore_case: bool = False
    strip: bool = True


def acceptable(case: Any, expected_field: str) -> list[str] | None:
    """``expected.<field>`` as a list of strings (a string is a list of one), None when absent."""
    want = select(case.expected, expected_field)
    if want is None:
        return None
    if isinstance(want, str):
        return [want]
    if isinstance(want, list) and want and all(isinstance(w, str) for w in want):
        return list(want)
    where = f"{case.source}: $.expected.{expected_field}" if case.source else f"$.expected.{expected_field}"
    raise ConfigError(f"exact compares text, and the expected value is {want!r}", where=where,
                      fix=f'write a string, or a list of acceptable strings: "{expected_field}": ["...", "..."]')


@frozen
class Exact:
    options: Options
    metric = "proportion"

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def exclude(self, case: Any) -> str | None:
        return None if acceptable(case, self.options.expected_field) is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        wanted = acceptable(case, self.options.expected_field) or []
        got = select(execution.output, self.options.field)
        if not isinstance(got, str):
            return Judgment.failed("field_absent" if got is None else "not_text")
        if self.options.strip:
            wanted, got = [w.strip() for w in wanted], got.strip()
        if self.options.ignore_case:
            wanted, got = [w.casefold() for w in wanted], got.casefold()
        return Judgment.of(got in wanted)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("exact", Exact, options=Options)
