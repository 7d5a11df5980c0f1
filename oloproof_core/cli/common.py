"""What the commands share: the project options, printing lines to the terminal, one case of a run."""

from __future__ import annotations


import click



def echo(lines) -> None:
    """Print ``lines``, control characters escaped (cli/streams.py); on a terminal, tables fit its
    width and verdicts are coloured."""
    from oloproof_core.cli.streams import escape_controls
    from oloproof_core.outputs.terminal import shown

    click.echo("\n".join(shown(escape_controls("\n".join(lines)).split("\n"))))


def echo_stream(lines, chunk: int = 1000) -> None:
    """Print ``lines`` as they come, a thousand at a time, as :func:`echo` would (for listings
    with no table, which is fitted to the terminal whole)."""
    from itertools import islice

    lines = iter(lines)
    while part := list(islice(lines, chunk)):
        echo(part)


config_option = click.option("--config", "config", metavar="FILE", default=None,
                             help="The suite's config file (default: oloproof.yaml in this directory).")


format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                             help="text (the default), or json: one JSON document, for scripts.")


store_option = click.option("--store", "store_spec", metavar="STORE", default=None,
                            help="The store: local, a postgresql:// URL, or {type: ..., ...} (default: the suite's "
                                 "store:, else $OLOPROOF_STORE, else local).")


def warn_damaged(store) -> None:
    damaged = getattr(store, "damaged", None)
    if damaged:
        counts = ", ".join(f"{n} {ns}" for ns, n in sorted(damaged.items()))
        click.echo(f"warning: cached values failed their checksum and were recomputed ({counts}); "
                   "run `oloproof store check`", err=True)


def find_case(store, run_id: str, case_id: str) -> dict | None:
    """One case record of a run: by the store's ``run_case`` when it has one, else the first record
    of ``run_cases`` with that id (the scan stops there)."""
    lookup = getattr(store, "run_case", None)
    if lookup is not None:
        return lookup(run_id, case_id)
    return next((r for r in store.run_cases(run_id) if r["id"] == case_id), None)
