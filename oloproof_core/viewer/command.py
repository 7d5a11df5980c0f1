"""`oloproof view`: the read-only web viewer, a command the viewer's plugin adds."""

from __future__ import annotations


import click

from oloproof_core.cli.common import config_option, store_option
from oloproof_core.workflows.project import Project


WARNING = ("WARNING: --host {host} is not a loopback address: every input, output, document and judge "
           "rationale in the store becomes readable by anyone on the network who can reach this machine, "
           "with no login; serve on 127.0.0.1 (the default) unless that is what you want")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default="8765", show_default=True, metavar="PORT", help="The port (0 picks a free one).")
@click.option("--allow-host", "allowed", multiple=True, metavar="NAME[:PORT]",
              help="Another Host name to answer (a DNS name or a reverse proxy's); repeatable.")
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in a web browser.")
@config_option
@store_option
def view(host: str, port: str, allowed: tuple[str, ...], open_browser: bool, config: str | None,
         store_spec: str | None) -> None:
    """Serve a read-only web viewer of this project's runs, cases, comparisons and diagnoses."""
    from oloproof_core.model.errors import ConfigError
    from oloproof_core.viewer.guard import is_loopback, parse_authority
    from oloproof_core.viewer.server import probe, serve

    number = int(port) if port.isascii() and port.isdigit() and len(port) <= 5 else -1
    if not 0 <= number <= 65535:
        raise ConfigError(f"--port: {port!r} is not a port number",
                          fix="pass a number from 1 to 65535, or 0 for a free one")
    for name in allowed:
        if parse_authority(name) is None:
            raise ConfigError(f"--allow-host: {name!r} is not a host name or NAME:PORT",
                              fix="pass a name as a browser sends it in Host, e.g. viewer.example.com")
    project = Project(config, store_spec, existing=True)
    store = project.reader()
    probe(store)  # a store that cannot be opened stops here, in one line, before anything listens
    if not is_loopback(host):
        click.echo(WARNING.format(host=host), err=True)

    def announce(url: str) -> None:
        click.echo(f"Oloproof viewer on {url} (read-only; Ctrl-C stops it)")

    serve(store, project.plugins, host, number, announce, open_browser, allowed)


def oloproof_register_commands(cli) -> None:
    cli.add_command(view)
