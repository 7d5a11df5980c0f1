"""Registry: name -> component, and the plugin (and distribution) that registered it."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any

from attrs import frozen

from oloproof_core.model.errors import ConfigError, PluginError


@frozen(kw_only=True)
class Entry:
    """One registered component: a factory, its options class, and where it came from."""

    kind: str
    name: str
    factory: Callable[..., Any]
    options: type | None
    plugin: str
    distribution: str
    version: str
    extra: dict


class Registry:
    """Components of one kind (systems, evaluators, ...), filled by the register hooks.

    Behaviour never depends on registration order: registering a name twice is an error.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}
        self._plugin = ("<unknown>", "<unknown>", "")
        self.disabled: set[str] = set()  # plugin names blocked by disable_plugins / OLOPROOF_DISABLE_PLUGINS

    def _current(self, plugin: str, distribution: str, version: str) -> None:
        self._plugin = (plugin, distribution, version)

    def add(self, name: str, factory: Callable[..., Any], *, options: type | None = None, **extra: Any) -> None:
        """Register ``name``; ``options`` is the attrs class its YAML options structure into.

        :param name: the name a suite uses (``type: <name>``, ``slices: [<name>]``, ...).
        :param factory: called as ``factory(options, ...)`` when a suite uses the name.
        :param extra: kind-specific metadata, e.g. ``shorthand="target"`` for a system whose
            YAML value may be a plain string.
        """
        plugin, distribution, version = self._plugin
        if name in self._entries:
            other = self._entries[name]
            raise PluginError(
                f"{self.kind[:-1]} {name!r} is registered twice: by plugin {other.plugin!r} "
                f"({other.distribution} {other.version}) and by plugin {plugin!r} ({distribution} {version})",
                fix=f"disable one of them with `disable_plugins: [{plugin}]` in oloproof.yaml "
                "or OLOPROOF_DISABLE_PLUGINS",
            )
        self._entries[name] = Entry(kind=self.kind, name=name, factory=factory, options=options,
                                    plugin=plugin, distribution=distribution, version=version, extra=extra)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def names(self) -> list[str]:
        return sorted(self._entries)

    def get(self, name: str, *, where: str | None = None) -> Entry:
        """The entry for ``name``, or a ConfigError naming the close matches and the choices."""
        try:
            return self._entries[name]
        except KeyError:
            if name in self.disabled:
                raise ConfigError(f"{self.kind[:-1]} {name!r} comes from plugin {name!r}, which is disabled",
                                  where=where, fix="remove it from disable_plugins / OLOPROOF_DISABLE_PLUGINS") from None
            close = difflib.get_close_matches(name, self._entries, n=1)
            hint = f"did you mean {close[0]!r}?" if close else (
                f"use one of: {', '.join(self.names())}, or install the plugin that provides it")
            raise ConfigError(f"unknown {self.kind[:-1]} {name!r}", where=where, fix=hint) from None
