"""The ``callable`` system: a Python function decorated with ``@system``, called with each input
(and, when it has a ``history`` parameter, a conversation's earlier turns as ``history=[...]``).

``system.callable: module:function`` in oloproof.yaml; the project directory is importable.
"""

from __future__ import annotations

from typing import Any

from attrs import frozen

from oloproof import (
    ConfigError, OloproofError, SystemInfo, hookimpl, import_object, project_fingerprint, short_fingerprint, takes_keyword,
)


@frozen(kw_only=True)
class Options:
    target: str  # "module:function"


class CallableSystem:
    """Calls the function with the case's ``input``; recording goes through ``current_case()``."""

    def __init__(self, options: Options, context: Any):
        try:
            self.fn = import_object(options.target)
        except OloproofError as exc:
            raise ConfigError(exc.problem, fix=exc.fix) from None
        info: SystemInfo | None = getattr(self.fn, "__oloproof_system__", None)
        if not callable(self.fn):
            raise ConfigError(f"{options.target} is not callable", fix="point callable: at a function")
        declared_name = info.name if info else getattr(self.fn, "__name__", options.target)
        declared_version = info.version if info else "0"
        self.name = context.name or declared_name
        self.records = frozenset(info.records if info else ())
        self.takes_history = takes_keyword(self.fn, "history")
        # every loaded module of the project and the installed packages they use: editing a helper
        # module that the function imports is a different system
        project = project_fingerprint([context.project_dir])
        self.version = f"{context.version or declared_version}+{short_fingerprint(project)}"
        self.identity = {"kind": "callable", "name": self.name, "version": context.version or declared_version,
                         "target": options.target, "project": project}

    def execute(self, case: Any, recorder: Any) -> Any:
        if self.takes_history:  # a conversation's earlier turns, [] at a first turn
            return self.fn(case.input, history=case.history_data())
        return self.fn(case.input)


@hookimpl
def oloproof_register_systems(registry):
    registry.add("callable", CallableSystem, options=Options, shorthand="target")
