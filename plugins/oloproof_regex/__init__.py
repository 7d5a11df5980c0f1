"""The ``regex`` evaluator: the output's field matches a regular expression (Python's ``re``).

``mode`` is ``search`` (anywhere, the default), ``match`` (at the start) or ``fullmatch`` (the
whole text); ``flags`` a list of ``re`` flag names; ``negate: true`` passes when it does not
match. A pattern that does not compile is a configuration error at ``$.evaluators[N].pattern``.
A field that is not a string is matched as its JSON text (``42``, ``{"a": 1}``).
"""

from __future__ import annotations

import re
from typing import Any

import attrs
from attrs import frozen

from oloproof import ConfigError, Judgment, hookimpl, select, text_of

FLAGS = {"IGNORECASE": re.IGNORECASE, "MULTILINE": re.MULTILINE, "DOTALL": re.DOTALL, "VERBOSE": re.VERBOSE,
         "ASCII": re.ASCII}
MODES = ("search", "match", "fullmatch")


def _mode(instance: Any, attribute: Any, value: str) -> None:
    if value not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {value!r}",
                          fix="write mode: search (anywhere), match (at the start) or fullmatch (the whole text)",
                          key=attribute.name)


def _flags(instance: Any, attribute: Any, value: tuple[str, ...]) -> None:
    for name in value:
        if name not in FLAGS:
            raise ConfigError(f"unknown regex flag {name!r}", fix=f"use {', '.join(FLAGS)}", key=attribute.name)


def compiled(pattern: str, flags: tuple[str, ...]) -> re.Pattern:
    """``pattern`` compiled with the named flags; a ConfigError located at ``pattern`` if it does not compile."""
    bits = 0
    for name in flags:
        bits |= FLAGS[name]
    try:
        return re.compile(pattern, bits)
    except re.error as exc:
        at = f" at position {exc.pos}" if exc.pos is not None else ""
        raise ConfigError(f"invalid regular expression {pattern!r}: {exc.msg}{at}",
                          fix="fix the pattern (in YAML, quote it with single quotes so backslashes stay as written)",
                          key="pattern") from None


def _pattern(instance: Any, attribute: Any, value: str) -> None:
    compiled(value, ())


@frozen(kw_only=True)
class Options:
    criterion: str
    pattern: str = attrs.field(validator=_pattern)
    field: str | None = None  # a dotted path into the output object; None: the whole output
    mode: str = attrs.field(default="search", validator=_mode)
    flags: tuple[str, ...] = attrs.field(default=(), validator=_flags)
    negate: bool = False  # pass when the pattern does not match


@frozen
class Regex:
    """Pass when the field matches ``pattern`` (or, with ``negate``, when it does not)."""

    options: Options
    regex: re.Pattern = attrs.field(init=False, eq=False, repr=False)
    metric = "proportion"
    cached = False  # in-process and deterministic: made again for less than a cache row costs

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "regex", compiled(self.options.pattern, self.options.flags))

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        got = select(execution.output, self.options.field)
        if got is None:
            return Judgment.failed("field_absent", field=self.options.field)
        found = getattr(self.regex, self.options.mode)(text_of(got))
        if self.options.negate:
            if found is None:
                return Judgment.passed()
            return Judgment.failed("pattern_matched", field=self.options.field, pattern=self.options.pattern,
                                   matched=found.group(0)[:200])
        if found is not None:
            return Judgment.passed(matched=found.group(0)[:200])
        return Judgment.failed("pattern_not_matched", field=self.options.field, pattern=self.options.pattern,
                               mode=self.options.mode)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("regex", Regex, options=Options)
