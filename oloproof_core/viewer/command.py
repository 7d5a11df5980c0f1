"""`oloproof view`: the read-only web viewer, a command the viewer's plugin adds."""

from __future__ import annotations


import click

from oloproof_core.cli.common import config_option, store_option
from oloproof_core.hooks.specs import hookimpl
from oloproof_core.workflows.project import Project


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535),
              help="The port, 0 to 65535 (0 picks a free one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in a web browser.")
@config_option
@store_option
def view(host: str, port: int, open_browser: bool, config: str | None, store_spec: str | None) -> None:
    """Serve a read-only web viewer of this project's runs, cases, comparisons and diagnoses."""
    from oloproof_core.viewer.server import serve

    project = Project(config, store_spec, existing=True)

    def announce(url: str) -> None:
        click.echo(f"Oloproof viewer on {url} (read-only; Ctrl-C stops it)")

    serve(project.reader(), project.plugins, host, port, announce, open_browser)


@hookimpl
def oloproof_register_commands(cli) -> None:
    cli.add_command(view)
