"""`oloproof label`: plan which cases of a run to label, label them (the viewer's labelling page, or
the terminal), export and import labels. A viewer command, since the page is the viewer's."""

from __future__ import annotations

from pathlib import Path

import click

from oloproof_core.cli.common import config_option, echo, store_option
from oloproof_core.workflows.project import Project


class LabelGroup(click.Group):
    """``oloproof label RUN_ID ...`` is ``oloproof label start RUN_ID ...``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["start", *args]
        return super().parse_args(ctx, args)


@click.group(cls=LabelGroup)
def label() -> None:
    """Human labels of a judge criterion: plan them, make them, export and import them.

    oloproof label plan RUN_ID picks the cases; oloproof label RUN_ID --terminal labels them.
    """


def _policy_labels(project: Project) -> dict:
    """The labels files the suite's policy names, if the config can be read without running."""
    from oloproof_core.engine.human import file_labels

    if not project.config_path.is_file():  # no config here: plan from the store alone
        return {}
    doc, _ = project.skeleton()
    policy = doc.data.get("policy") if isinstance(doc.data, dict) else None
    if not isinstance(policy, dict) or not policy.get("labels"):
        return {}
    from oloproof_core.decisions.gate import load_policy

    return file_labels(load_policy(doc, policy, project.config_path.parent, ("policy",)), project.config_path.parent)


@label.command()
@click.argument("run_id", metavar="RUN_ID")
@click.option("--criterion", default=None, metavar="NAME", help="Plan one judge criterion (default: every one).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the draw of cases.")
@click.option("--count", default=None, type=click.IntRange(min=1), metavar="N",
              help="Label N cases in all instead of what the rules need.")
@config_option
@store_option
def plan(run_id: str, criterion: str | None, seed: int, count: int | None, config: str | None,
         store_spec: str | None) -> None:
    """How many labels, from which judge verdict, would decide each undecided judge rule; pick them."""
    from oloproof_core.workflows.labelling import make_plan

    project = Project(config, store_spec)
    lines, _ = make_plan(project.store, run_id, criterion, seed, count, _policy_labels(project))
    echo(lines)


@label.command(hidden=True)
@click.argument("run_id", metavar="RUN_ID")
@click.option("--terminal", is_flag=True, help="Label in the terminal instead of the browser.")
@click.option("--criterion", default=None, metavar="NAME", help="The criterion's plan (default: the latest plan).")
@click.option("--labeller", default=None, metavar="NAME", help="Who labels (default: git config user.name).")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="The labelling page's port on 127.0.0.1 (0 picks a free one).")
@click.option("--no-open", "no_open", is_flag=True, help="Do not open a web browser.")
@config_option
@store_option
def start(run_id: str, terminal: bool, criterion: str | None, labeller: str | None, port: int, no_open: bool,
          config: str | None, store_spec: str | None) -> None:
    """Label the planned cases of RUN_ID in the browser (or with --terminal)."""
    from oloproof_core.storage.labels import labeller_name

    project = Project(config, store_spec)
    if terminal:
        from oloproof_core.workflows.terminal_labelling import label_in_terminal

        label_in_terminal(project.store, run_id, criterion, labeller_name(labeller),
                          ask=lambda prompt: click.prompt(prompt, default="", show_default=False, prompt_suffix=""),
                          tell=lambda line: echo([line]))
        return
    from oloproof_core.viewer.labels import LabelSession, serve_labels

    session = LabelSession(project.store, run_id, criterion, labeller_name(labeller))

    def announce(url: str) -> None:
        click.echo(f"Labelling page for {session.criterion} on {session.run}: {url} (127.0.0.1 only; Ctrl-C stops it)")

    serve_labels(session, port, announce, open_browser=not no_open)


@label.command(name="export")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@store_option
def export_(path: str, store_spec: str | None) -> None:
    """Write every stored label to FILE, one JSON object a line."""
    from oloproof_core.storage.labels import export_labels

    count = export_labels(Project(None, store_spec).store, Path(path))
    echo([f"Exported {count} labels to {path}"])


@label.command(name="import")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, exists=True))
@store_option
def import_(path: str, store_spec: str | None) -> None:
    """Store the labels of FILE (written by oloproof label export)."""
    from oloproof_core.storage.labels import import_labels

    count = import_labels(Project(None, store_spec).store, Path(path))
    echo([f"Imported {count} new labels from {path}"])


def oloproof_register_commands(cli) -> None:
    cli.add_command(label)
