"""The ``truncate`` intervention: every passage of a case's recorded context cut to its first
``--option words=N`` words, beside a control that regenerates from the whole passages. It asks what
shorter passages (smaller chunks, a summariser) would do, on the run's own contexts.
"""

from __future__ import annotations

from typing import Any

from attrs import evolve, field, frozen

from oloproof import ConfigError, Perturbation, hookimpl, renumbered


def _words(instance: Any, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"words must be a whole number >= 1, got {value!r}", fix="pass --option words=50", key="words")


@frozen(kw_only=True)
class Options:
    words: int | None = field(default=None, validator=_words)  # required; None gives the error its fix


class Truncate(Perturbation):
    """Regenerate from the recorded context with each passage cut to its first N words."""

    name = "truncate"

    def __init__(self, options: Options):
        self.words = options.words
        self.label = "truncate" if options.words is None else f"truncate {options.words} words"

    def check(self, system: Any) -> None:
        if self.words is None:
            raise ConfigError("--intervention truncate needs --option words=N, the words each passage keeps",
                              fix="pass --option words=50")

    def perturb(self, case, context):
        cut = [evolve(item, text=" ".join((item.text or "").split()[:self.words]), tokens=None)
               for item in context.items]
        return renumbered(cut, "truncated")


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("truncate", Truncate, options=Options)
