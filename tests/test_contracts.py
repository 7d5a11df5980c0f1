"""Contracts of the plugin framework: builtins registered like third parties, documented hooks,
plugins that import only the public API, and modules that do nothing at import time."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").is_file())
CORE_PLUGINS = {"oloproof_core.outputs.reporters", "oloproof_core.viewer.reporter"}
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_builtin_is_an_entry_point_and_a_package():
    entry_points = PYPROJECT["project"]["entry-points"]["oloproof"]
    packages = PYPROJECT["tool"]["setuptools"]["packages"]
    package_dir = PYPROJECT["tool"]["setuptools"]["package-dir"]
    registered = set(entry_points.values())
    for plugin in PLUGINS:
        assert plugin.name in registered, f"{plugin.name} has no entry point in [project.entry-points.oloproof]"
        assert plugin.name in packages, f"{plugin.name} is not in [tool.setuptools] packages"
        assert package_dir.get(plugin.name) == f"plugins/{plugin.name}"
    # besides the plugins/ packages: the reporters of the outputs layer and the viewer's, builtin
    # plugins of the core registered through the same entry points (docs/architecture.md)
    assert registered == {p.name for p in PLUGINS} | CORE_PLUGINS


def test_builtins_are_found_through_installed_entry_point_metadata():
    from importlib_metadata import entry_points

    found = {ep.value for ep in entry_points(group="oloproof") if ep.dist and ep.dist.name == "oloproof"}
    assert {p.name for p in PLUGINS} <= found


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_plugins_import_only_the_public_api(plugin):
    others = {p.name for p in PLUGINS} - {plugin.name}
    for source in plugin.rglob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top != "oloproof_core", f"{source.name}:{node.lineno} imports the engine ({name})"
                assert top not in others, f"{source.name}:{node.lineno} imports another plugin ({name})"


def test_every_hookspec_is_documented_with_its_exact_signature():
    from oloproof_core.hooks import specs as hookspecs

    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    specs = [f for name, f in vars(hookspecs).items() if name.startswith("oloproof_") and callable(f)]
    assert len(specs) >= 10
    for spec in specs:
        signature = str(inspect.signature(spec)).replace("'", "")
        assert f"### `{spec.__name__}{signature}`" in docs, f"docs/plugins.md lacks {spec.__name__}{signature}"
        assert spec.__doc__ and ".. versionadded::" in spec.__doc__


def test_every_cli_command_is_in_the_readme_or_docs():
    import click

    from oloproof_core.cli import cli

    names = cli.list_commands(click.Context(cli))  # every plugin's command, the builtins among them
    assert {"run", "compare", "diagnose", "view", "export"} <= set(names)
    text = (ROOT / "README.md").read_text(encoding="utf-8") + "".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))
    for name in names:
        assert f"oloproof {name}" in text, f"`oloproof {name}` is documented nowhere"


MODULES = ["oloproof", "oloproof_core.cli", "oloproof_core.engine.runner", "oloproof_core.engine.execution",
           "oloproof_core.decisions.compare", "oloproof_core.workflows.diagnose", "oloproof_core.outputs.reporters",
           "oloproof_core.viewer.command", "oloproof_core.viewer.reporter", *[p.name for p in PLUGINS]]


@pytest.mark.parametrize("module", MODULES)
def test_every_module_imports_on_its_own_without_warnings(module):
    proc = subprocess.run([sys.executable, "-W", "error", "-c", f"import {module}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_nothing_heavy_happens_at_import_time():
    code = ("import sys, oloproof, oloproof_core.cli; "
            "heavy = [m for m in ('scipy', 'numpy', 'httpx', 'aiohttp', 'asyncio', 'ruamel.yaml', 'sqlite3') "
            "if m in sys.modules]; "
            "print(','.join(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


def test_every_builtin_command_is_a_plugin_of_the_command_hook():
    """The command line calls a builtin command module's hook itself, so the module carries no
    marker (and ``oloproof --help`` does not import pluggy); marked and registered in a plugin
    manager like a third party's, each passes pluggy's checks and adds the command it is named for."""
    import importlib

    import click
    import pluggy

    from oloproof_core.cli import BUILTIN_COMMANDS
    from oloproof_core.hooks import specs

    pm = pluggy.PluginManager("oloproof")
    pm.add_hookspecs(specs)
    for module in BUILTIN_COMMANDS.values():
        plugin = importlib.import_module(module)
        specs.hookimpl(plugin.oloproof_register_commands)
        pm.register(plugin, name=module)
    pm.check_pending()
    group = click.Group()
    pm.hook.oloproof_register_commands(cli=group)
    assert sorted(group.commands) == sorted(BUILTIN_COMMANDS)


def test_listing_the_commands_imports_only_the_command_modules():
    """``oloproof --help`` defines every command and reads nothing else: neither pluggy nor the
    storage layer (whose imports cost more than the rest of the listing; benchmarks/startup_vs.py)."""
    code = ("import sys; sys.argv = ['oloproof', '--help']\n"
            "from oloproof_core.hooks.discovery import others_may_exist\n"
            "from oloproof_core.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = ['pluggy', 'shutil', 'json', 'hashlib', 'oloproof_core.storage']\n"
            "if others_may_exist():\n    heavy = heavy[1:]\n"  # another distribution's commands come through pluggy
            "print(*[name for name in heavy if name in sys.modules], file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "Commands:" in proc.stdout and "run " in proc.stdout
    assert proc.stderr.strip() == ""


def test_a_plugin_command_named_like_a_builtin_leaves_the_builtin(monkeypatch):
    import click

    from oloproof_core import cli as cli_module

    group = cli_module.PluginGroup()
    group.get_command(click.Context(group), "run")
    builtin = group.commands["run"]
    group.add_command(click.Command("run", callback=lambda: None))
    group.add_command(click.Command("other", callback=lambda: None))
    assert group.commands["run"] is builtin and "other" in group.commands
