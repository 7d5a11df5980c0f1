"""`oloproof plugins`: every discovered plugin and what it provides."""

from __future__ import annotations


import click

from oloproof_core.cli.common import config_option, echo
from oloproof_core.workflows.project import Project


@click.command()
@config_option
def plugins(config: str | None) -> None:
    """List every discovered plugin, what it provides, and its distribution."""
    from oloproof_core.statistics.display import table

    rows = Project(config).plugins.listing()
    echo(table(["plugin", "provides", "distribution"],
                [[r["plugin"], ", ".join(r["provides"]) or "hooks: " + ", ".join(r["hooks"]),
                  f"{r['distribution']} {r['version']}".strip()] for r in rows]))


def oloproof_register_commands(cli) -> None:
    cli.add_command(plugins)
