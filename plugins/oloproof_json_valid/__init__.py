"""The ``json_valid`` evaluator: the output's field is a JSON document.

A string passes when it parses as JSON, read strictly: no NaN or Infinity, no duplicate key (what
``json.loads`` lets through but another parser refuses). Any other value a system returned is JSON
already (the store keeps nothing else) and passes; an absent field fails with ``field_absent``.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import Judgment, hookimpl, select, strict_json


@frozen(kw_only=True)
class Options:
    criterion: str
    field: str | None = None  # a dotted path into the output object; None: the whole output


@frozen
class JsonValid:
    """Pass when the field is a JSON document (a string that parses strictly, or a structured value)."""

    options: Options
    metric = "proportion"
    cached = False  # in-process and deterministic: made again for less than a cache row costs

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        got = select(execution.output, self.options.field)
        if got is None:
            return Judgment.failed("field_absent", field=self.options.field)
        if not isinstance(got, str):
            return Judgment.passed()
        try:
            strict_json(got)
        except ValueError as exc:
            return Judgment.failed("invalid_json", field=self.options.field, error=str(exc)[:200])
        return Judgment.passed()


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("json_valid", JsonValid, options=Options)
