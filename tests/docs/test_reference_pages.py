"""The generated reference pages are up to date, so no CLI option or YAML key goes undocumented."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load(script: str):
    spec = importlib.util.spec_from_file_location(script, ROOT / "scripts" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("script", "page"), [("cli_reference", "cli.md"), ("config_reference", "config.md")])
def test_generated_page_is_current(script, page):
    current = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert current == load(script).render(), f"docs/{page} is out of date: run python scripts/{script}.py"


def test_every_cli_option_is_in_the_reference():
    import click

    from oloproof_core.cli import cli

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")

    def walk(command: click.Command) -> None:
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in text, f"{opt} of {command.name} is undocumented"
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for sub in command.list_commands(ctx):
                walk(command.get_command(ctx, sub))

    walk(cli)
