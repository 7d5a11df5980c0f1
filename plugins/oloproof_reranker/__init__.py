"""The ``reranker`` intervention: replay the recorded retrieval through your reranker.

``--reranker module:function``, a function ``(input, candidates) -> candidates``. Never calls
the retriever; its control replays the same retrieval unchanged.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import ConfigError, OloproofError, hookimpl, import_object


@frozen(kw_only=True)
class Options:
    reranker: str | None = None  # "module:function"; required, checked with the other options


class Reranker:
    """Replay the recorded retrieval with the candidates reordered by your function."""

    name = "reranker"
    labels_by_recovery = False  # carries the labels of the run's gold-context diagnosis forward
    confirms = "RANKED_OUT"  # the label whose cases a better order should recover
    control_label = "replay control"
    tests = "a reranker"  # the candidate experiment it tests, named after a diagnosis that suggests it
    usage = "--reranker MODULE:FUNCTION"  # its options, in the command a diagnosis prints

    def __init__(self, options: Options):
        self.target = options.reranker
        self.label = "reranker" if options.reranker is None else f"reranker {options.reranker}"
        self.function = None

    def supports(self, system: Any) -> bool:
        accepts = getattr(system, "accepts", None)  # a service cannot be handed a reordered retrieval
        return callable(getattr(system, "replay", None)) and (accepts is None or accepts("rerank"))

    def check(self, system: Any) -> None:
        if self.target is None:
            raise ConfigError("--intervention reranker needs --reranker MODULE:FUNCTION",
                              fix="pass e.g. --reranker rerank:shortest_first, a function (input, candidates) "
                                  "-> candidates in rerank.py beside app.py")
        try:
            self.function = import_object(self.target)
        except OloproofError as exc:
            raise ConfigError(f"--reranker: {exc.problem}", fix=exc.fix) from None
        if not callable(self.function):
            raise ConfigError(f"--reranker {self.target} is not a function",
                              fix="point it at a function (input, candidates) -> candidates")

    def apply(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.replay(case, record, recorder, rerank=self.function)

    def control(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.replay(case, record, recorder)


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("reranker", Reranker, options=Options)
