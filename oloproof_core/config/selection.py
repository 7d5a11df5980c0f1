"""A subset of the suite's cases for one run: ``--filter`` (AND of ``FIELD=GLOB``), then a seeded
``--sample``, then the first ``--limit``. The run records what was selected. docs/cases.md.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from typing import Any

from attrs import evolve, field, frozen

from oloproof_core.config.turns import conversation_of, is_turn
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import Case, as_tuple  # a Python converter: attrs inspects a builtin one slowly

FILTER_FIX = "write FIELD=GLOB or FIELD!=GLOB, FIELD being id or metadata.KEY: --filter 'id=case_0*' " \
             "or --filter metadata.topic=billing"


@frozen(kw_only=True)
class Selection:
    """What ``oloproof run`` (or ``oloproof.evaluate``) was asked to run of the suite."""

    limit: int | None = None
    filters: tuple[str, ...] = field(default=(), converter=as_tuple)
    sample: int | None = None
    seed: int | None = None  # the sample's seed; 0 when not given

    def flags(self) -> str:
        """The selection as the command line spells it: ``--filter metadata.topic=billing --limit 10``."""
        parts = [f"--filter {f}" for f in self.filters]
        if self.sample is not None:
            parts.append(f"--sample {self.sample} --seed {self.seed or 0}")
        if self.limit is not None:
            parts.append(f"--limit {self.limit}")
        return " ".join(parts)


def parse_filter(expression: str) -> tuple[tuple[str, ...], bool, str]:
    """``metadata.topic=bill*`` -> (("metadata", "topic"), True, "bill*"); ``!=`` negates."""
    name, sep, pattern = expression.partition("=")
    negate = name.endswith("!")
    name = name.removesuffix("!").strip()
    path = tuple(name.split("."))
    if not sep or not name or not (path == ("id",) or (path[0] == "metadata" and len(path) > 1 and all(path))):
        raise ConfigError(f"cannot read {expression!r}", where="--filter", fix=FILTER_FIX)
    return path, not negate, pattern


def _value(case: Case, path: tuple[str, ...]) -> Any:
    value: Any = case.id if path == ("id",) else case.metadata
    for key in path[1:]:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if value is None or isinstance(value, (dict, list)) else str(value)


def matches(case: Case, parsed: Sequence[tuple[tuple[str, ...], bool, str]]) -> bool:
    """Every filter holds: ``=`` needs the field present and matching, ``!=`` anything else."""
    for path, equal, pattern in parsed:
        value = _value(case, path)
        if (value is not None and fnmatch.fnmatchcase(value, pattern)) != equal:
            return False
    return True


def select(cases: Sequence[Case], selection: Selection) -> tuple[Sequence[Case], dict | None]:
    """The selected cases, in the suite's order, and the record of the selection (None: all of them).

    :raises ConfigError: a bad expression, a filter that matches nothing, a sample larger than what
        is left, a limit or sample below 1.
    """
    if not (selection.filters or selection.sample is not None or selection.limit is not None):
        return cases, None  # as they are: a large case file is not read into memory
    for flag, value in (("--limit", selection.limit), ("--sample", selection.sample)):
        if value is not None and value < 1:
            raise ConfigError(f"must be at least 1, got {value}", where=flag, fix=f"pass {flag} 10, or leave it out")
    parsed = [parse_filter(f) for f in selection.filters]
    chosen = [c for c in cases if matches(c, parsed)]
    if not chosen:
        path = parsed[0][0]
        seen = sorted({v for v in (_value(c, path) for c in cases) if v is not None})
        hint = (f"{'.'.join(path)} takes {len(seen)} values: {', '.join(seen[:5])}{', ...' if len(seen) > 5 else ''}"
                if seen and path != ("id",) else f"no case has {'.'.join(path)}" if not seen else
                f"ids look like {', '.join(seen[:3])}")
        raise ConfigError(f"{' '.join(selection.filters)} matches none of the {len(cases)} cases", where="--filter",
                          fix=f"check the field and the pattern ({hint}); globs are case-sensitive")
    # a suite of conversations is sampled and limited by whole conversations (docs/conversations.md)
    units = conversations(chosen)
    what = "conversations" if units is not None else "cases"
    if units is None:
        units = [[c] for c in chosen]
    if selection.sample is not None:
        if selection.sample > len(units):
            after = " that pass --filter" if selection.filters else ""
            raise ConfigError(f"{selection.sample} is more than the {len(units)} {what}{after}",
                              where="--sample", fix=f"pass --sample {len(units)} or fewer, or leave it out")
        import random

        keep = set(random.Random(selection.seed or 0).sample(range(len(units)), selection.sample))
        units = [u for i, u in enumerate(units) if i in keep]  # the suite's order
    if selection.limit is not None:
        units = units[:selection.limit]
    chosen = [c for unit in units for c in unit]
    record = {"flags": selection.flags(), "filters": list(selection.filters), "sample": selection.sample,
              "seed": (selection.seed or 0) if selection.sample is not None else None, "limit": selection.limit,
              "selected": len(chosen), "of": len(cases)}
    return tuple(chosen), record


def conversations(cases: Sequence[Case]) -> list[list[Case]] | None:
    """``cases`` as their conversations (the turns of one are consecutive; a plain case is one of
    its own), or None when none of them is a turn."""
    if not any(is_turn(c) for c in cases):
        return None
    units: list[list[Case]] = []
    for case in cases:
        if is_turn(case) and units and is_turn(units[-1][0]) and conversation_of(units[-1][0]) == conversation_of(case):
            units[-1].append(case)
        else:
            units.append([case])
    return units


def select_suite(suite: Any, selection: Selection | None) -> tuple[Any, dict | None]:
    """The suite with only the selected cases, and the selection's record for the run header."""
    if selection is None:
        return suite, None
    cases, record = select(suite.cases, selection)
    return (suite if record is None else evolve(suite, cases=cases)), record

