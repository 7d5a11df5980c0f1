"""The ``callable`` system: a Python function decorated with ``@system``, called with each input.

``system.callable: module:function`` in oloproof.yaml; the project directory is importable.
"""

from __future__ import annotations

import importlib
from typing import Any

from attrs import frozen

from oloproof import ConfigError, SystemInfo, hookimpl, source_fingerprint


@frozen(kw_only=True)
class Options:
    target: str  # "module:function"


def load_target(target: str) -> Any:
    """Import ``module:attribute``, with errors that say which part is wrong."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{target!r} is not module:function", fix="write e.g. `callable: app:run`")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import module {module_name!r}: {exc}",
                          fix=f"put {module_name}.py in the project directory or install it") from exc
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"module {module_name!r} has no attribute {attr!r}",
                              fix=f"define {attr} in {module_name}.py or fix the name") from None
    return obj


class CallableSystem:
    """Calls the function with the case's ``input``; recording goes through ``current_case()``."""

    def __init__(self, options: Options, context: Any):
        self.fn = load_target(options.target)
        info: SystemInfo | None = getattr(self.fn, "__oloproof_system__", None)
        if not callable(self.fn):
            raise ConfigError(f"{options.target} is not callable", fix="point callable: at a function")
        declared_name = info.name if info else getattr(self.fn, "__name__", options.target)
        declared_version = info.version if info else "0"
        self.name = context.name or declared_name
        self.records = frozenset(info.records if info else ())
        fingerprint = source_fingerprint(self.fn)
        self.version = f"{context.version or declared_version}+{fingerprint[:12]}"
        self.identity = {"kind": "callable", "name": self.name, "version": context.version or declared_version,
                         "target": options.target, "code": fingerprint}

    def execute(self, case: Any, recorder: Any) -> Any:
        return self.fn(case.input)


@hookimpl
def oloproof_register_systems(registry):
    registry.add("callable", CallableSystem, options=Options, shorthand="target")
