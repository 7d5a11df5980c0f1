"""The ``cost`` evaluator: the tokens (and, with prices, the dollars) a case's ``usage/v1``
records are within the limits.

Limits: ``max_tokens`` (the recorded total, else prompt + completion), ``max_prompt_tokens``,
``max_completion_tokens``, and ``max_cost`` in dollars from ``price_per_million_prompt_tokens``
and ``price_per_million_completion_tokens``. Counts are summed over every ``usage/v1`` record of
the case. A case with no ``usage/v1`` record, or without a count a limit needs, is missing with
that reason, never a pass; a system that records nothing of the kind cannot use it (the suite is
rejected before anything runs).
"""

from __future__ import annotations

import math
from typing import Any

import attrs
from attrs import frozen

from oloproof import ConfigError, Judgment, hookimpl

LIMITS = ("max_tokens", "max_prompt_tokens", "max_completion_tokens", "max_cost")


def _at_least_zero(instance: Any, attribute: Any, value: float | None) -> None:
    if value is not None and not (value >= 0 and math.isfinite(value)):
        raise ConfigError(f"{attribute.name} must be a finite number >= 0, got {value!r}",
                          fix=f"write e.g. `{attribute.name}: 1000`", key=attribute.name)


@frozen(kw_only=True)
class Options:
    criterion: str
    max_tokens: int | None = attrs.field(default=None, validator=_at_least_zero)
    max_prompt_tokens: int | None = attrs.field(default=None, validator=_at_least_zero)
    max_completion_tokens: int | None = attrs.field(default=None, validator=_at_least_zero)
    max_cost: float | None = attrs.field(default=None, validator=_at_least_zero)  # dollars a case
    price_per_million_prompt_tokens: float | None = attrs.field(default=None, validator=_at_least_zero)
    price_per_million_completion_tokens: float | None = attrs.field(default=None, validator=_at_least_zero)

    def __attrs_post_init__(self) -> None:
        if all(getattr(self, name) is None for name in LIMITS):
            raise ConfigError("cost needs a limit", fix=f"add one of {', '.join(LIMITS)}")
        if (self.price_per_million_prompt_tokens is None) != (self.price_per_million_completion_tokens is None):
            raise ConfigError("give both price_per_million_prompt_tokens and price_per_million_completion_tokens, or neither",
                              fix="add the missing price (0 if that side is free)")
        if self.max_cost is not None and self.price_per_million_prompt_tokens is None:
            raise ConfigError("max_cost needs the prices to compute a cost",
                              fix="add price_per_million_prompt_tokens and price_per_million_completion_tokens")


@frozen
class Cost:
    """Pass when every limit given holds for the case's recorded usage."""

    options: Options
    metric = "proportion"
    cached = False  # in-process and deterministic: made again for less than a cache row costs
    reads = ("usage/v1",)

    @property
    def criterion(self) -> str:
        return self.options.criterion

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        records = execution.artifacts.get("usage/v1", ())
        if not records:
            return Judgment.missing("no_usage_recorded: the system recorded no usage/v1 for this case")
        tokens: dict[str, int] = {}
        for record in records:
            for name, count in record.get("tokens", {}).items():
                tokens[name] = tokens.get(name, 0) + count
        if "total" not in tokens and "prompt" in tokens and "completion" in tokens:
            tokens["total"] = tokens["prompt"] + tokens["completion"]
        options = self.options
        measured: dict[str, float] = {}
        for limit, count in (("max_tokens", "total"), ("max_prompt_tokens", "prompt"),
                             ("max_completion_tokens", "completion")):
            if getattr(options, limit) is not None:
                if count not in tokens:
                    return Judgment.missing(f"no_tokens_recorded: usage/v1 records no {count} token count for {limit}")
                measured[limit] = tokens[count]
        if options.price_per_million_prompt_tokens is not None and "prompt" in tokens and "completion" in tokens:
            measured["max_cost"] = round((tokens["prompt"] * options.price_per_million_prompt_tokens
                                          + tokens["completion"] * options.price_per_million_completion_tokens) / 1e6, 9)
        if options.max_cost is not None and "max_cost" not in measured:
            return Judgment.missing("no_tokens_recorded: usage/v1 records no prompt and completion counts for max_cost")
        over = [limit for limit in LIMITS if limit in measured and getattr(options, limit) is not None
                and measured[limit] > getattr(options, limit)]
        detail = {"tokens": tokens, **({"cost": measured["max_cost"]} if "max_cost" in measured else {})}
        if over:
            return Judgment.failed(f"over_{over[0]}", **detail, limit=getattr(options, over[0]), over=over)
        return Judgment.passed(**detail)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("cost", Cost, options=Options)
