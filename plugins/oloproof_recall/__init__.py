"""The ``recall`` evaluator: the fraction of the case's relevant units among the first k retrieved.

With one relevant unit a case the value is 0 or 1 and the judgment is pass/fail; with several it
is a score in [0, 1]. The ``fraction`` metric reports the criterion as a proportion when every
observed value is 0 or 1, else as a mean. The ranking is the retriever's own order in the last
recorded ``retrieval/v1``; a unit retrieved twice counts once. See docs/retrieval-metrics.md.
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
    criterion: str | None = None  # None: recall_at_{k}
    relevance_unit: str = field(default="doc", validator=_check_unit)


@frozen
class Recall:
    """The share of the case's relevant units (grade > 0) found among the first ``k`` ranked units."""

    options: Options
    metric = "fraction"
    reads = ("retrieval/v1",)

    @property
    def criterion(self) -> str:
        return self.options.criterion or f"recall_at_{self.options.k}"

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
        found = sum(1 for name in top if name in relevant)
        value = found / len(relevant)
        if value in (0.0, 1.0):
            return Judgment.of(value == 1.0, found=found, relevant=len(relevant))
        return Judgment.score(value, found=found, relevant=len(relevant))


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("recall", Recall, options=Options)
