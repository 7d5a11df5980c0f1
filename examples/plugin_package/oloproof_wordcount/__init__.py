"""The ``word_limit`` evaluator: the output's field has at most ``max_words`` words."""

from __future__ import annotations

from typing import Any

import attrs
from attrs import frozen

from oloproof import ConfigError, Judgment, hookimpl, select


def _positive(instance: Any, attribute: Any, value: int) -> None:
    if value < 1:
        raise ConfigError(f"max_words must be at least 1, got {value}", fix="write e.g. `max_words: 50`")


@frozen(kw_only=True)
class Options:
    criterion: str
    field: str | None = None  # a dotted path into the output object; None: the whole output
    max_words: int = attrs.field(validator=_positive)  # `field` above is an option's name


@frozen
class WordLimit:
    """Pass when the answer has at most ``max_words`` whitespace-separated words."""

    options: Options
    metric = "proportion"  # pass/fail judgments, summarised as a proportion with an interval

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        text = select(execution.output, self.options.field)
        if text is None:
            return Judgment.failed("field_absent")
        words = len(str(text).split())
        ok = words <= self.options.max_words
        return Judgment.of(ok, None if ok else "too_many_words", words=words, max_words=self.options.max_words)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("word_limit", WordLimit, options=Options)
