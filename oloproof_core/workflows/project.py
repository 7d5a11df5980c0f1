"""The project a command works on: its config file, plugins and store, each opened when first used."""

from __future__ import annotations

from pathlib import Path

from oloproof_core.model.errors import ConfigError

class Project:
    """The project a command works on: its config file, plugins and store, opened lazily."""

    def __init__(self, config: str | None, store: str | None = None, existing: bool = False):
        """:param existing: the command reads a project (runs, inspect, compare, ...): without its
        config file or a local store here, and with no other store named, it stops before
        anything is created."""
        self.store_spec = store  # --store: beats the suite's store and OLOPROOF_STORE
        self.config_path = Path(config or "oloproof.yaml")
        if existing and store is None and not self.config_path.is_file():
            if config is not None or not Path(".oloproof").is_dir():  # runs made with another --config
                _no_project(config)
        try:
            self.dir = self.config_path.resolve().parent
        except (RuntimeError, OSError):  # a symbolic link loop: reading it says so, in one line
            from oloproof_core.config.files import read_text

            read_text(self.config_path, limit=1, fix="pass another file with --config")
            raise
        self._skeleton = None
        self._plugins = None
        self._store = None

    def skeleton(self):
        from oloproof_core.engine.system import load_skeleton

        if self._skeleton is None:
            self._skeleton = load_skeleton(self.config_path)
        return self._skeleton

    @property
    def plugins(self):
        if self._plugins is None:
            from oloproof_core.hooks.manager import Plugins, disabled_from_env, make_plugin_manager

            disabled = disabled_from_env()
            if self.config_path.is_file():
                disabled += self.skeleton()[1].disable_plugins
            self._plugins = Plugins(make_plugin_manager(disabled=disabled))
        return self._plugins

    def reader(self):
        """The store opened read-only, for the commands that only read it."""
        if self._store is None:
            store = self.store
            if hasattr(store, "read_only"):
                store.read_only = True
        return self._store

    @property
    def store(self):
        """``--store``, else the suite's ``store:``, else ``OLOPROOF_STORE``, else the local store."""
        if self._store is None:
            from oloproof_core.storage.stores import from_environment, open_spec, open_store
            from oloproof_core.engine.system import _options

            if self.store_spec is not None:
                self._store = open_spec(self.plugins, self.dir, self.store_spec, "--store")
                return self._store
            doc = None
            if self.config_path.is_file():
                doc, skeleton = self.skeleton()
            if doc is not None and isinstance(doc.data, dict) and "store" in doc.data:
                data = dict(skeleton.store)
                store_type = data.pop("type", "local")
                entry = self.plugins.stores.get(store_type, where=doc.where(("store", "type")))
                self._store = open_store(entry, _options(doc, entry, data, ("store",), f"store {store_type!r}"), self.dir)
            else:
                self._store = from_environment(self.plugins, self.dir)
            if self._store is None:
                entry = self.plugins.stores.get("local")
                options = _options(doc, entry, {}, ("store",), "store 'local'") if doc else None
                self._store = open_store(entry, options, self.dir)
        return self._store


def _no_project(config: str | None) -> None:
    """A command that reads a project's runs, run where there is none: say so, create nothing."""
    import os

    if config is not None:
        raise ConfigError(f"no config file {config}", where="--config",
                          fix="pass the path of an existing oloproof.yaml, or create one with `oloproof init`")
    if os.environ.get("OLOPROOF_STORE"):
        return  # the team's store, named in the environment: no project file needed to read it
    raise ConfigError("no oloproof.yaml here, so there is no project to read",
                      fix="cd to the project's directory, pass --config FILE, or create a project with "
                          "`oloproof init --template callable DIR`")
