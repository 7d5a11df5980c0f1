"""The ``latency`` evaluator: the seconds a case's ``usage/v1`` records are within ``max_seconds``.

The seconds are the sum of the recorded stages (every ``usage/v1`` record of the case), or of one
stage with ``stage:`` (``retriever``, ``llm``). A case with no ``usage/v1`` record, or none of the
stage asked for, is missing with that reason, never a pass. A system that records nothing of the
kind cannot use it: the suite is rejected before anything runs. The wall-clock time of the call is
not what this reads: a reused execution was not timed in this run (docs/checks.md).
"""

from __future__ import annotations

import math
from typing import Any

import attrs
from attrs import frozen

from oloproof import ConfigError, Judgment, hookimpl


def _positive(instance: Any, attribute: Any, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"max_seconds must be a finite number > 0, got {value!r}", fix="write e.g. `max_seconds: 2.5`",
                          key=attribute.name)


@frozen(kw_only=True)
class Options:
    criterion: str
    max_seconds: float = attrs.field(validator=_positive)
    stage: str | None = None  # one recorded stage; None: the sum of every stage


@frozen
class Latency:
    """Pass when the recorded seconds (all stages, or ``stage``) are at most ``max_seconds``."""

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
        stages: dict[str, float] = {}
        for record in records:
            for name, seconds in record.get("stages", {}).items():
                stages[name] = stages.get(name, 0.0) + seconds
        stage = self.options.stage
        if stage is not None and stage not in stages:
            recorded = ", ".join(sorted(stages)) or "no stage"
            return Judgment.missing(f"no_stage_recorded: usage/v1 has no {stage!r} stage (it has {recorded})")
        if not stages:
            return Judgment.missing("no_stage_recorded: usage/v1 records no stage seconds for this case")
        seconds = stages[stage] if stage is not None else sum(stages.values())
        ok = seconds <= self.options.max_seconds
        return Judgment.of(ok, None if ok else "too_slow", seconds=round(seconds, 6),
                           max_seconds=self.options.max_seconds, stage=stage)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("latency", Latency, options=Options)
