"""The ``token-budget`` intervention: replay the recorded retrieval with a larger token budget.

Never calls the retriever, and keeps the run's top_k: only the budget changes. Its control
replays the same retrieval with the run's own budget. It tests the candidate experiment "a
larger token budget" and confirms CONTEXT_ASSEMBLY_LOSS labels.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import ConfigError, hookimpl


@frozen(kw_only=True)
class Options:
    token_budget: int | None = None  # required; checked against the system, so the error can name the budget


class TokenBudget:
    """Replay the recorded retrieval, assembling the context with the same top_k and a larger budget."""

    name = "token-budget"
    labels_by_recovery = False  # carries the labels of the run's gold-context diagnosis forward
    confirms = "CONTEXT_ASSEMBLY_LOSS"  # the label whose cases a larger budget should recover
    control_label = "replay control"
    tests = "a larger token budget"  # the candidate experiment it tests, named after a diagnosis that suggests it
    usage = "--token-budget N"  # its options, in the command a diagnosis prints

    def __init__(self, options: Options):
        self.token_budget = options.token_budget
        self.label = "token-budget" if options.token_budget is None else f"token-budget {options.token_budget}"

    def supports(self, system: Any) -> bool:
        accepts = getattr(system, "accepts", None)  # a service says whether its request takes a budget
        return callable(getattr(system, "replay", None)) and (accepts is None or accepts("token_budget"))

    def check(self, system: Any) -> None:
        budget = getattr(system, "token_budget", None)
        if budget is None and getattr(system, "accepts", None) is not None:  # a service's own budget is unknown
            if isinstance(self.token_budget, bool) or not isinstance(self.token_budget, int) or self.token_budget < 1:
                raise ConfigError("--intervention token-budget needs --token-budget N, the budget the service is sent",
                                  fix="pass --token-budget N, a whole number above the service's own budget")
            return
        if budget is None:
            raise ConfigError("the run's system has no token_budget, so nothing is dropped for the budget to "
                              "recover", fix="use --intervention top-k or reranker, or set token_budget and run again")
        if self.token_budget is None:
            raise ConfigError("--intervention token-budget needs --token-budget N, the larger budget to replay with",
                              fix=f"pass --token-budget N with N > {budget}")
        if isinstance(self.token_budget, bool) or self.token_budget <= budget:
            raise ConfigError(f"--token-budget {self.token_budget} is not above the run's token_budget {budget}",
                              fix=f"pass a larger --token-budget, above {budget}")

    def apply(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.replay(case, record, recorder, token_budget=self.token_budget)

    def control(self, system: Any, case: Any, record: dict, recorder: Any) -> Any:
        return system.replay(case, record, recorder)


@hookimpl
def oloproof_register_interventions(registry):
    registry.add("token-budget", TokenBudget, options=Options)
