"""The plugin manager: builtins and third-party packages, all loaded from one entry-point group."""

from __future__ import annotations

import inspect
import os
import types
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pluggy

from oloproof_core.hooks import specs as hookspecs
from oloproof_core.model.errors import PluginError

if TYPE_CHECKING:  # the registries' module (attrs) is imported when a registry is built, not by `oloproof --help`
    from oloproof_core.hooks.registry import Registry

GROUP = "oloproof"
KINDS = ("systems", "evaluators", "metrics", "interventions", "slices", "stores", "artifacts", "providers",
         "executors", "reporters", "span_mappings", "trace_receivers", "generators")


def _entry_points() -> list:
    from oloproof_core.hooks.discovery import entry_points as read_directly

    found = read_directly(GROUP)  # sys.path of folders only: read without importlib-metadata
    if found is None:
        from importlib_metadata import entry_points

        found = entry_points(group=GROUP)
    return sorted(found, key=lambda ep: ep.name)


def name_and_version(dist: Any) -> tuple[str, str]:
    """A distribution's name and version, read from the head of its metadata file: the two
    fields are single-line headers, and the email parser behind ``dist.metadata`` costs more to
    import than most plugins do."""
    if dist is None:
        return ("<unknown>", "")
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():  # the headers end at the first blank line
            break
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version"):
            found.setdefault(key, value.strip())
    return (found.get("Name"), found.get("Version"))  # type: ignore[return-value]  # None if absent, as before


def disabled_from_env() -> list[str]:
    """Plugins disabled by ``OLOPROOF_DISABLE_PLUGINS=a,b``."""
    return [n.strip() for n in os.environ.get("OLOPROOF_DISABLE_PLUGINS", "").split(",") if n.strip()]


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, reading a module plugin's hook implementations from the module's own
    namespace. pluggy looks at every name a plugin holds through ``inspect.getattr_static``
    (safe for any object); a module's names are plain, and that look was about a fortieth of a
    1-case run over 55 plugins (benchmarks/startup_vs.py). What is found is the same: a routine
    carrying the ``oloproof_impl`` marker."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if not isinstance(plugin, types.ModuleType):
            return super().parse_hookimpl_opts(plugin, name)
        method = plugin.__dict__.get(name)
        if not inspect.isroutine(method):
            return None
        opts = getattr(method, f"{self.project_name}_impl", None)
        return opts if isinstance(opts, dict) else None


def make_plugin_manager(*, entry_points: bool = True, disabled: Iterable[str] = (),
                        plugins: Iterable[tuple[str, Any]] = ()) -> pluggy.PluginManager:
    """A fresh manager: hookspecs, then every entry point of the ``oloproof`` group.

    :param disabled: plugin names never imported (``disable_plugins:``).
    :param plugins: extra ``(name, module)`` pairs, e.g. project-local plugins or test doubles.
    """
    pm = PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    pm.distributions = {}  # plugin name -> (distribution, version)
    for name in disabled:  # block first: a disabled plugin is never imported
        pm.set_blocked(name)
    if entry_points:
        register_entry_points(pm)
    for name, module in plugins:
        pm.register(module, name=name)
        pm.distributions[name] = ("<local>", "")
    try:
        pm.check_pending()  # a misspelt hook name fails here, not silently
    except pluggy.PluginValidationError as exc:
        name = pm.get_name(exc.plugin) or repr(exc.plugin)
        dist = pm.distributions.get(name, ("<unknown>", ""))
        raise PluginError(f"plugin {name!r} from {dist[0]} {dist[1]}: {exc}",
                          fix="rename the function to one of the oloproof_* hooks, or remove it") from exc
    return pm


def register_entry_points(pm: pluggy.PluginManager, select: Any = None) -> None:
    """Register every entry point of the ``oloproof`` group not blocked or registered already
    (``select(distribution_name)``: only those of the distributions it accepts)."""
    about: dict[int, tuple[str, str]] = {}  # id(distribution) -> (name, version): its METADATA parsed once
    for ep in _entry_points():
        if pm.is_blocked(ep.name) or pm.has_plugin(ep.name):
            continue
        if id(ep.dist) not in about:  # each distribution's metadata read once
            about[id(ep.dist)] = name_and_version(ep.dist)
        dist = about[id(ep.dist)]
        if select is not None and not select(dist[0]):
            continue
        try:
            pm.register(ep.load(), name=ep.name)
        except Exception as exc:  # ImportError and PluginValidationError alike
            raise PluginError(
                f"plugin {ep.name!r} (entry point {ep.name} = {ep.value} in group {GROUP!r}, "
                f"from {dist[0]} {dist[1]}) failed to load: {type(exc).__name__}: {exc}",
                fix=f"upgrade or reinstall {dist[0]}, or disable it with OLOPROOF_DISABLE_PLUGINS={ep.name}",
            ) from exc
        pm.distributions[ep.name] = dist


def command_plugins() -> pluggy.PluginManager:
    """The plugins of every distribution but Oloproof's own (whose commands are builtins the
    command line adds itself), minus ``OLOPROOF_DISABLE_PLUGINS``: what other commands come from."""
    pm = PluginManager(GROUP)
    pm.add_hookspecs(hookspecs)
    pm.distributions = {}
    for name in disabled_from_env():
        pm.set_blocked(name)
    register_entry_points(pm, select=lambda distribution: distribution != "oloproof")
    return pm


def build_registry(pm: pluggy.PluginManager, kind: str) -> Registry:
    """Call ``oloproof_register_<kind>`` one implementation at a time, so every entry records
    the plugin and distribution that added it."""
    from oloproof_core.hooks.registry import Registry

    registry = Registry(kind)
    registry.disabled = {name for name, plugin in pm.list_name_plugin() if plugin is None}  # blocked names
    caller = getattr(pm.hook, f"oloproof_register_{kind}")
    for impl in reversed(caller.get_hookimpls()):  # registration order as loaded
        dist, version = getattr(pm, "distributions", {}).get(impl.plugin_name, ("<unknown>", ""))
        registry._current(impl.plugin_name, dist, version)
        try:
            impl.function(**{k: v for k, v in {"registry": registry}.items() if k in impl.argnames})
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(
                f"plugin {impl.plugin_name!r} ({dist} {version}) failed in oloproof_register_{kind}: "
                f"{type(exc).__name__}: {exc}",
                fix=f"fix or upgrade {dist}, or disable it with OLOPROOF_DISABLE_PLUGINS={impl.plugin_name}",
            ) from exc
    return registry


class Plugins:
    """The manager and its registries, built once per command."""

    def __init__(self, pm: pluggy.PluginManager):
        self.pm = pm
        self._registries: dict[str, Registry] = {}

    def __getattr__(self, kind: str) -> Registry:
        if kind not in KINDS:
            raise AttributeError(kind)
        if kind not in self._registries:
            self._registries[kind] = build_registry(self.pm, kind)
        return self._registries[kind]

    def listing(self) -> list[dict]:
        """Every registered plugin: its name, distribution, version and what it provides."""
        rows = []
        for name, plugin in sorted(self.pm.list_name_plugin()):
            if plugin is None:
                continue
            dist, version = getattr(self.pm, "distributions", {}).get(name, ("<unknown>", ""))
            provides = [f"{entry.kind[:-1]} {entry.name}" for kind in KINDS
                        for entry in getattr(self, kind) if entry.plugin == name]
            hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or ())
            rows.append({"plugin": name, "distribution": dist, "version": version,
                         "provides": provides, "hooks": hooks})
        return rows
