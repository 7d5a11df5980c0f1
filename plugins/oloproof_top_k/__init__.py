"""The ``top-k`` intervention: replay the recorded retrieval with a wider cut-off.

Never calls the retriever. Its control replays the same retrieval with the run's own top_k.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import ConfigError, hookimpl


@frozen(kw_only=True)
class Options:
    top_k: int | None = None  # required; checked against the system, so the error can name the range


class TopK:
    """Replay the recorded retrieval, assembling the context with a wider top-k."""

    name = "top-k"
    labels_by_recovery = False  # carries the labels of the run's gold-context diagnosis forward
    confirms = "RANKED_OUT"  # the label whose cases a wider cut-off should recover
    control_label = "replay control"
    tests = "a larger top-k"  # the candidate experiment it tests, named after a diagnosis that suggests it
    usage = "--top-k N"  # its options, in the command a diagnosis prints

    def __init__(self, options: Options):
        self.top_k = options.top_k
        self.label = "top-k" if options.top_k is None else f"top-k {options.top_k}"

    def supports(self, system: Any) -> bool:
        accepts = getattr(system, "accepts", None)  # a service says whether its request takes a top_k
        return callable(getattr(system, "replay", None)) and (accepts is None or accepts("top_k"))

    def check(self, system: Any) -> None:
        if getattr(system, "top_k", None) is None:  # a service's own top_k is unknown: any cut-off it takes
            if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 1:
                raise ConfigError("--intervention top-k needs --top-k N, the cut-off the service is sent",
                                  fix="pass --top-k N, a whole number above the service's own top_k")
            return
        if self.top_k is None:
            raise ConfigError("--intervention top-k needs --top-k N, the wider cut-off to replay with",
                              fix=f"pass --top-k N with {system.top_k} < N <= {system.depth}")
        if self.top_k <= system.top_k:
            raise ConfigError(f"--top-k {self.top_k} is not above the run's top_k {system.top_k}",
                              fix=f"pass a larger --top-k, up to the depth {system.depth}")
        if self.top_k > system.depth:
            raise ConfigError(f"--top-k {self.top_k} is beyond the recorded depth {system.depth}",
                              fix=f"pass --top-k {system.depth} at most; a replay has only the recorded candidates")

    def apply(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.replay(case, record, recorder, top_k=self.top_k)

    def control(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.replay(case, record, recorder)


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("top-k", TopK, options=Options)
