"""`oloproof runs`: the runs stored in the project."""

from __future__ import annotations

import click

from oloproof_core.cli.common import config_option, echo, format_option, store_option
from oloproof_core.model.errors import OloproofError
from oloproof_core.workflows.project import Project


@click.command()
@click.option("--all", "show_all", is_flag=True, help="List diagnoses' child runs too (each marked ROLE of PARENT).")
@format_option
@config_option
@store_option
def runs(show_all: bool, fmt: str, config: str | None, store_spec: str | None) -> None:
    """List the runs stored in this project, newest first, each with its gate.

    `latest` names the newest run in any command, `previous` (or `latest~1`) the one before it,
    `latest~N` the N-th before it. A diagnosis's child runs are left out (`--all` lists them).
    The config column is a short hash of the system's identity (its settings and code), so two
    runs of the same code under different settings can be told apart. `--format json` lists
    every run's header, child runs included, oldest first, as the store keeps them.
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
    listed = [h for h in reversed(headers) if show_all or not h.get("parent")]
    if not listed:
        click.echo("No runs yet; start one with `oloproof run`." if not headers else
                   f"No runs of the suite yet, only {len(headers)} diagnosis child run"
                   f"{'' if len(headers) == 1 else 's'}; `oloproof runs --all` lists them.")
        return
    from oloproof_core.model.identity import digest

    def origin(h: dict) -> str:
        return f"{h['role']} of {h['parent']}" if h.get("parent") else ""

    def cases(h: dict) -> str:  # a subset run never reads as a full one
        return f"{h['cases']} of {h['selection']['of']}" if h.get("selection") else str(h["cases"])

    def gate(h: dict) -> str:  # the policy's decision; — for a run without a policy or a child run
        if h.get("parent"):
            return "—"
        try:
            return str(store.get_run(h["id"])[1].get("gate") or "—")
        except OloproofError:  # listed, then damaged: `store check` says how; the list goes on
            return "?"

    rows = [[h["id"], h["created"], gate(h), h["state"], f"{h['system']['name']} {h['system']['version']}",
             digest(h["system"].get("identity"))[:8], cases(h)] + ([origin(h)] if show_all else []) for h in listed]
    echo(table(["run", "created", "gate", "state", "system", "config", "cases"]
               + (["diagnosis child"] if show_all else []), rows))
    hidden = len(headers) - len(listed)
    if hidden:
        click.echo(f"{hidden} diagnosis child run{'' if hidden == 1 else 's'} not listed; `oloproof runs --all` "
                   "lists them.")


def oloproof_register_commands(cli) -> None:
    cli.add_command(runs)
