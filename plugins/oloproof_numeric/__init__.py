"""The ``numeric`` evaluator: a number in the output is the expected number, within a tolerance.

The number is the field's value when it is a number, else the first number written in its text
(``last: true``: the last; ``"about 1,234.5 km"`` reads 1234.5). It passes when
``|got - expected| <= max(abs_tol, rel_tol * |expected|)``, as ``pytest.approx(expected,
rel=..., abs=...)`` decides: the tolerance is relative to the expected value, not to the larger of
the two as in ``math.isclose``. With neither tolerance, only an equal number passes. The expected
value is the case's ``expected.<expected_field>``, a number; anything else is a configuration
error naming the case's line.
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs
from attrs import frozen

from oloproof import ConfigError, Judgment, hookimpl, select

# a sign (not a hyphen inside a word: COVID-19, 2024-05-01), digits (thousands grouped by commas,
# or not), a fraction, an exponent
NUMBER = re.compile(r"(?:(?<![\w.])[-+−])?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def _tolerance(instance: Any, attribute: Any, value: float | None) -> None:
    if value is not None and not (value >= 0 and math.isfinite(value)):
        raise ConfigError(f"{attribute.name} must be a finite number >= 0, got {value!r}",
                          fix=f"write e.g. `{attribute.name}: 0.01`", key=attribute.name)


@frozen(kw_only=True)
class Options:
    criterion: str
    field: str | None = None  # a dotted path into the output object; None: the whole output
    expected_field: str = "answer"  # a key of the case's `expected`
    abs_tol: float | None = attrs.field(default=None, validator=_tolerance)
    rel_tol: float | None = attrs.field(default=None, validator=_tolerance)  # a fraction of |expected|
    last: bool = False  # read the last number of a text rather than the first


def number_in(value: Any, last: bool = False) -> float | None:
    """``value`` as a number: itself when it is one, else the first (or last) number in its text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    found = NUMBER.findall(value)
    if not found:
        return None
    text = (found[-1] if last else found[0]).replace(",", "").replace("−", "-")
    return float(text)


def expected_number(case: Any, expected_field: str) -> float | None:
    """The case's expected number, None when absent; any other value is a ConfigError at the case's line."""
    want = select(case.expected, expected_field)
    if want is None:
        return None
    if isinstance(want, (int, float)) and not isinstance(want, bool) and math.isfinite(want):
        return float(want)
    where = f"{case.source}: $.expected.{expected_field}" if case.source else f"$.expected.{expected_field}"
    raise ConfigError(f"evaluator 'numeric' expects a number, got {want!r}", where=where,
                      fix=f"write the expected value as a JSON number, e.g. {{\"{expected_field}\": 42}}")


@frozen
class Numeric:
    """Pass when the number read from the field is within tolerance of the expected number."""

    options: Options
    metric = "proportion"
    cached = False  # in-process and deterministic: made again for less than a cache row costs

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def exclude(self, case: Any) -> str | None:
        """Cases that declare no expected number are outside this criterion."""
        return None if expected_number(case, self.options.expected_field) is not None else "no_expected_value"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        want = expected_number(case, self.options.expected_field)
        value = select(execution.output, self.options.field)
        if value is None:
            return Judgment.failed("field_absent", field=self.options.field)
        got = number_in(value, self.options.last)
        if got is None or not math.isfinite(got):
            return Judgment.failed("no_number", field=self.options.field, expected=want)
        tolerance = max(self.options.abs_tol or 0.0, (self.options.rel_tol or 0.0) * abs(want))
        ok = abs(got - want) <= tolerance
        return Judgment.of(ok, None if ok else "out_of_tolerance", got=got, expected=want, error=abs(got - want))


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("numeric", Numeric, options=Options)
