"""The ``query-rewrite`` intervention: re-execute a failed case with its query rewritten.

``--option synonyms={PHRASE: REPLACEMENT, ...}`` replaces each phrase of the query (whole words,
any case) before the staged system runs again, retrieval included. Its control re-executes the
case unchanged. A retrieval miss that recovers under a rewrite points at the query's wording.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
from attrs import frozen

from oloproof import ConfigError, hookimpl


def _not_empty(instance: Any, attribute: Any, value: Mapping[str, str]) -> None:
    if not value:
        raise ConfigError("synonyms is empty", fix="pass e.g. --option 'synonyms={money back: refunds}'")


@frozen(kw_only=True)
class Options:
    synonyms: Mapping[str, str] = attrs.field(validator=_not_empty)  # phrase -> replacement
    field: str = "question"  # the input field that holds the query


class QueryRewrite:
    """Re-run the whole staged system on the rewritten query; judge the answer to the original case."""

    name = "query-rewrite"
    label = "query rewrite"
    control_label = "rerun control"
    labels_by_recovery = False  # carries the labels of the run's gold-context diagnosis forward
    confirms = "RETRIEVAL_MISS"  # the label whose cases a better query should recover

    def __init__(self, options: Options):
        self.field = options.field
        # longest phrase first, so "money back guarantee" wins over "money back"
        self.rules = [(re.compile(rf"\b{re.escape(phrase)}\b", re.IGNORECASE), replacement)
                      for phrase, replacement in sorted(options.synonyms.items(), key=lambda kv: -len(kv[0]))]

    def supports(self, system: Any) -> bool:
        return callable(getattr(system, "rerun", None))

    def check(self, system: Any) -> None:
        """Nothing to check before running: the query field is checked on each case."""

    def rewrite(self, query: str) -> str:
        for pattern, replacement in self.rules:
            query = pattern.sub(replacement, query)
        return query

    def apply(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        query = case.input.get(self.field)
        if not isinstance(query, str):
            raise ConfigError(f"case {case.id!r} has no text input field {self.field!r} to rewrite",
                              fix="name the field that holds the query with --option field=NAME")
        rewritten = attrs.evolve(case, input={**case.input, self.field: self.rewrite(query)})
        return system.rerun(rewritten, recorder)

    def control(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.rerun(case, recorder)


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("query-rewrite", QueryRewrite, options=Options)
