"""`oloproof runs`: the runs stored in the project."""

from __future__ import annotations

import click

from oloproof_core.cli.common import config_option, echo, format_option, store_option
from oloproof_core.workflows.project import Project


@click.command()
@format_option
@config_option
@store_option
def runs(fmt: str, config: str | None, store_spec: str | None) -> None:
    """List the runs stored in this project (`latest` names the newest one in any command).

    The config column is a short hash of the system's identity (its settings and code), so two
    runs of the same code under different settings can be told apart.
    """
    import json

    from oloproof_core.statistics.display import table

    store = Project(config, store_spec, existing=True).reader()
    headers = store.list_runs()
    left_out = getattr(store, "damaged_runs", None)
    if left_out:
        from oloproof_core.storage.runs import shown_text

        click.echo(f"warning: {len(left_out)} damaged run{'' if len(left_out) == 1 else 's'} not listed "
                   f"({', '.join(shown_text(r, 40) for r in left_out[:5])}{', ...' if len(left_out) > 5 else ''}); "
                   "run `oloproof store check`", err=True)
    if fmt == "json":
        from oloproof_core.results.view import run_ref

        click.echo(json.dumps([run_ref(h) for h in headers], indent=2, ensure_ascii=False))
        return
    if not headers:
        click.echo("No runs yet; start one with `oloproof run`.")
        return
    from oloproof_core.model.identity import digest

    def origin(h: dict) -> str:
        return f"{h['role']} of {h['parent']}" if h.get("parent") else ""

    def cases(h: dict) -> str:  # a subset run never reads as a full one
        return f"{h['cases']} of {h['selection']['of']}" if h.get("selection") else str(h["cases"])

    echo(table(["run", "created", "state", "system", "config", "cases", "diagnosis child"],
                [[h["id"], h["created"], h["state"], f"{h['system']['name']} {h['system']['version']}",
                  digest(h["system"].get("identity"))[:8], cases(h), origin(h)] for h in headers]))


def oloproof_register_commands(cli) -> None:
    cli.add_command(runs)
