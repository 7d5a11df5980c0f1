"""The ``hit_rate`` evaluator: pass when any relevant unit is among the first k retrieved.

The ranking is the retriever's own order in the last recorded ``retrieval/v1``; scores never
reorder it, a unit retrieved twice counts once (at its first position), and k may exceed the
number retrieved. See docs/retrieval-metrics.md.
"""

from __future__ import annotations

import difflib
from typing import Any

from attrs import field, frozen

from oloproof import ConfigError, Judgment, hookimpl, latest, ranked_units, relevant_units

UNITS = ("doc", "chunk")


def _check_k(instance: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"k must be a whole number >= 1, got {value!r}",
                          fix="write k: 1 or more, e.g. k: 5 to look at the first five retrieved")


def _check_unit(instance: Any, attribute: Any, value: Any) -> None:
    if value not in UNITS:
        close = difflib.get_close_matches(str(value), UNITS, n=1)
        raise ConfigError(f"relevance_unit must be doc or chunk, got {value!r}",
                          fix=f"write relevance_unit: {close[0] if close else 'doc'}")


@frozen(kw_only=True)
class Options:
    k: int = field(validator=_check_k)
    criterion: str | None = None  # None: hit_rate_at_{k}
    relevance_unit: str = field(default="doc", validator=_check_unit)


@frozen
class HitRate:
    """Pass when any of the case's relevant units is among the first ``k`` ranked units."""

    options: Options
    metric = "proportion"
    reads = ("retrieval/v1",)

    @property
    def criterion(self) -> str:
        return self.options.criterion or f"hit_rate_at_{self.options.k}"

    def exclude(self, case: Any) -> str | None:
        """Cases with no unit labelled relevant (grade > 0) are outside this criterion."""
        return None if relevant_units(case, self.options.relevance_unit) else "no_relevance_labels"

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        unit = self.options.relevance_unit
        relevant = relevant_units(case, unit)
        if not relevant:
            return Judgment.excluded("no_relevance_labels")
        retrieval = latest(execution, "retrieval/v1")
        if retrieval is None:
            return Judgment.missing("no_retrieval_recorded")
        top = ranked_units(retrieval, unit)[: self.options.k]
        rank = next((i for i, name in enumerate(top, 1) if name in relevant), None)
        return Judgment.of(rank is not None, rank=rank)


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("hit_rate", HitRate, options=Options)
