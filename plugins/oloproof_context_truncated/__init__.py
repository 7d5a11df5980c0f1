"""The ``context_truncated`` slice: whether context assembly dropped a passage for the budget."""

from __future__ import annotations

from typing import Any

from oloproof import ConfigError, hookimpl, latest


class ContextTruncated:
    name = "context_truncated"

    def __init__(self, argument: str | None):
        if argument:
            raise ConfigError(f"slice 'context_truncated' takes no field, got {argument!r}",
                              fix="write context_truncated")

    def check(self, system: Any) -> None:
        if getattr(system, "top_k", None) is None:
            raise ConfigError("slice 'context_truncated' compares the assembled context with top_k and the "
                              "budget, so it needs a staged system", fix="use a system.rag system, or remove the slice")

    def key(self, case: Any, execution: Any) -> str | None:
        context = latest(execution, "context/v1") if execution is not None else None
        if context is None:
            return None
        return "yes" if any(d.get("reason") == "token_budget" for d in context.get("dropped", ())) else "no"


@hookimpl
def oloproof_register_slices(registry):
    registry.add("context_truncated", ContextTruncated)
