"""`oloproof judge validate`: an LLM judge against human labels."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from oloproof_core.cli.common import config_option, echo, store_option
from oloproof_core.workflows.project import Project


@click.group()
def judge() -> None:
    """Validate an LLM judge against human labels before its criterion may gate."""


@judge.command()
@click.option("--labels", "labels_file", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help='JSONL, one line per case: {"id": "c001", "label": true}; see docs/judges.md.')
@click.option("--criterion", required=True, metavar="NAME", help="The judge's criterion (grounded, ...).")
@click.option("--run", "run_id", default=None, metavar="RUN_ID",
              help="Judge the outputs recorded in this run (default: latest, the newest run of the project).")
@config_option
@store_option
def validate(labels_file: str, criterion: str, run_id: str | None, config: str | None, store_spec: str | None) -> None:
    """Run the judge on human-labelled cases: agreement, kappa, TPR and TNR with intervals; store it."""
    from oloproof_core.engine.suite import load_suite
    from oloproof_core.workflows.validation import validate_judge

    project = Project(config, store_spec)
    doc, skeleton = project.skeleton()
    suite = load_suite(project.config_path, project.plugins, doc, skeleton, project.store)
    lines, code, _, _ = validate_judge(suite, project.plugins, project.store, criterion, Path(labels_file), run_id)
    echo(lines)
    sys.exit(int(code))


def oloproof_register_commands(cli) -> None:
    cli.add_command(judge)
