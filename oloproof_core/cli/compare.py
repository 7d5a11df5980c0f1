"""`oloproof compare`: two runs case by case under a written policy."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from oloproof_core.cli.common import config_option, echo, format_option, store_option
from oloproof_core.outputs.options import output_options, wanted_reports
from oloproof_core.workflows.project import Project

DEFAULT_POLICY = "compare.yaml"  # read from the project's directory when --policy is not given


@click.command()
@click.argument("candidate")
@click.argument("baseline")
@click.option("--policy", "policy_file", default=None, type=click.Path(dir_okay=False),
              help="The comparison policy (version, confidence_level, block_on, rules); default: the "
                   "project's compare.yaml, beside its config file.")
@click.option("--slices", "show_slices", is_flag=True, help="List the exploratory slice differences.")
@click.option("--cases", "show_cases", is_flag=True,
              help="List every case that changed verdict (default: the first 5 and a count).")
@click.option("--allow-different-evaluators", is_flag=True,
              help="Compare even if a criterion's evaluator config differs; its rules need manual review.")
@format_option
@output_options
@config_option
@store_option
def compare(candidate: str, baseline: str, policy_file: str, show_slices: bool, show_cases: bool,
            allow_different_evaluators: bool, fmt: str, junit: str | None, junit_cases: bool,
            json_file: str | None, markdown: str | None, reports: tuple[str, ...], config: str | None,
            store_spec: str | None) -> None:
    """Compare CANDIDATE with BASELINE case by case and decide the comparison policy.

    CANDIDATE and BASELINE are run ids (or prefixes), `latest`, `previous` (the run before it) or
    `latest~N`: `oloproof compare latest previous` compares the last two runs under compare.yaml.

    After the gate line come the cases that changed verdict: fixed (passing now) or broken.
    """
    from oloproof_core.decisions.compare import compare_runs, load_compare_policy
    from oloproof_core.outputs.text import render_comparison

    wanted = wanted_reports(junit, junit_cases, json_file, markdown, reports)
    project = Project(config, store_spec, existing=True)
    if wanted:  # an unknown reporter stops the command before it runs anything
        from oloproof_core.outputs import check_reports

        check_reports(project.plugins, wanted)
    if policy_file is None:  # the project's own, as `run` reads the suite's policy: without a flag
        policy_path = project.dir / DEFAULT_POLICY
        if not policy_path.is_file():
            from oloproof_core.model.errors import ConfigError

            raise ConfigError(f"no --policy given and no {DEFAULT_POLICY} in the project's directory, so there is "
                              "no comparison policy to decide", where="--policy",
                              fix=f"write {DEFAULT_POLICY} beside oloproof.yaml (docs/compare.md), or pass --policy FILE")
        policy_file = str(policy_path.relative_to(Path.cwd()) if policy_path.is_relative_to(Path.cwd())
                          else policy_path)
    policy = load_compare_policy(Path(policy_file))  # a bad policy file stops the command before the store
    store = project.store
    from oloproof_core.storage.stores import resolve_reference

    candidate, baseline = resolve_reference(store, candidate), resolve_reference(store, baseline)
    view, record = compare_runs(store, project.plugins, candidate, baseline, policy, allow_different_evaluators)
    store.put_object("comparison", view["id"], record)
    if fmt == "json":
        from oloproof_core.outputs import to_json

        click.echo(to_json(view), nl=False)
    else:
        echo(render_comparison(view, show_slices, show_cases))
    if wanted:  # --junit-cases: the candidate's cases
        from oloproof_core.outputs import ReportContext, write_reports

        write_reports(project.plugins, view, wanted, records=lambda: store.run_cases(candidate),
                      context=ReportContext(store, project.plugins, view["id"]))
    sys.exit(view["exit_code"])


def oloproof_register_commands(cli) -> None:
    cli.add_command(compare)
