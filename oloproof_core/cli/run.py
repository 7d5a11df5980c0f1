"""`oloproof run`: run the suite (or a subset), print metrics with intervals, decide the gate."""

from __future__ import annotations

import os
import sys

import click

from oloproof_core.cli.common import config_option, echo, store_option, warn_damaged
from oloproof_core.outputs.options import output_options, wanted_reports
from oloproof_core.workflows.project import Project


@click.command()
@config_option
@click.option("--no-cache", is_flag=True,
              help="Execute and judge every case afresh, stages included (the results are still cached).")
@click.option("--refresh", is_flag=True,
              help="Execute every case afresh, stages included, and overwrite the cached executions; "
                   "judgments of unchanged outputs still come from the cache.")
@click.option("--reuse-executions", is_flag=True,
              help="Reuse cached executions even of an opaque system such as http (as system.cache: reuse).")
@click.option("--until-decided", is_flag=True,
              help="Run the cases in a seeded random order, batch by batch, and stop as soon as the gate is "
                   "decided (anytime-valid intervals; see docs/runs.md).")
@click.option("--seed", type=int, default=None, metavar="N",
              help="The seed of --sample (default 0), and with --until-decided of the case order (default: the "
                   "policy's, else 0).")
@click.option("--batch", type=int, default=None, metavar="N",
              help="With --until-decided: cases run between two looks (default: the policy's, else 10).")
@click.option("--limit", type=int, default=None, metavar="N", help="Run only the first N cases (after --filter "
              "and --sample); the run records it is a subset.")
@click.option("--filter", "filters", multiple=True, metavar="EXPR",
              help="Run only the cases where FIELD=GLOB (or FIELD!=GLOB) holds, FIELD being id or metadata.KEY: "
                   "--filter 'id=case_0*', --filter metadata.topic=billing. Repeat to AND them.")
@click.option("--sample", type=int, default=None, metavar="N",
              help="Run a seeded random sample of N cases (see --seed); the same seed picks the same cases.")
@click.option("--trials", type=int, default=None, metavar="N",
              help="Execute every case N times (over the suite's trials:); cached trials are reused.")
@click.option("--executor", default=None, metavar="NAME",
              help="Where the cases execute: local (this machine, the default) or an executor plugin's "
                   "name such as ray; replaces the suite's executor: (see docs/scale.md).")
@click.option("--no-slices", is_flag=True, help="Leave the slice table out of the report (the viewer's run page still shows it).")
@click.option("--quiet", "-q", is_flag=True,
              help="Print only the run's line, the gate and its rules (and any cases without output).")
@output_options
@store_option
def run(config: str | None, no_cache: bool, refresh: bool, reuse_executions: bool, until_decided: bool,
        seed: int | None, batch: int | None, limit: int | None, filters: tuple[str, ...], sample: int | None,
        trials: int | None, executor: str | None, no_slices: bool, quiet: bool, junit: str | None,
        junit_cases: bool, json_file: str | None,
        markdown: str | None, reports: tuple[str, ...], store_spec: str | None) -> None:
    """Run the suite (or a subset of its cases), print metrics with intervals, and decide the gate."""
    from oloproof_core.outputs.terminal import Progress
    from oloproof_core.outputs.report import render_run
    from oloproof_core.engine.runner import run_suite
    from oloproof_core.config.selection import Selection, select_suite
    from oloproof_core.engine.sequential import plan
    from oloproof_core.engine.suite import load_suite

    if refresh and reuse_executions:
        raise click.UsageError("--refresh and --reuse-executions contradict each other; give one")
    wanted = wanted_reports(junit, junit_cases, json_file, markdown, reports)
    project = Project(config, store_spec)
    if wanted:  # an unknown reporter stops the command before it runs anything
        from oloproof_core.outputs import check_reports

        check_reports(project.plugins, wanted)
    doc, skeleton = project.skeleton()
    executions = "refresh" if refresh else "reuse" if reuse_executions else None
    suite = load_suite(project.config_path, project.plugins, doc, skeleton, project.store, use_cache=not no_cache,
                       executions=executions, trials=trials, executor=executor)
    suite, selection = select_suite(suite, Selection(limit=limit, filters=filters, sample=sample, seed=seed))
    sequential = plan(suite, until_decided, seed if until_decided or sample is None else None, batch)
    progress = Progress()  # on standard error when it is a terminal
    outcome = run_suite(suite, project.plugins, project.store, use_cache=not no_cache, sequential=sequential,
                        selection=selection, progress=progress if progress.on else None)
    echo(render_run(outcome, suite.min_slice_support, slices=not no_slices, quiet=quiet))
    if os.environ.get("OLOPROOF_DEBUG") == "1":  # --debug: where the system's own code raised
        debug_tracebacks(project.store, outcome.run_id)
    if wanted:  # from the stored run: the files say what `inspect` and `export` say
        from oloproof_core.outputs import ReportContext, write_reports
        from oloproof_core.results.view import run_view

        header, summary = project.store.get_run(outcome.run_id)
        cases = project.store.run_cases  # streamed: once for the view, once more for each reporter of the records
        write_reports(project.plugins, run_view(header, summary, cases(outcome.run_id)), wanted,
                      records=lambda: cases(outcome.run_id),
                      context=ReportContext(project.store, project.plugins, outcome.run_id))
    warn_damaged(project.store)
    sys.exit(int(outcome.exit_code))


def debug_tracebacks(store, run_id: str, shown: int = 10) -> None:
    """On standard error, the stored traceback of each case the system raised on (the first
    ``shown``; ``oloproof inspect RUN --case ID`` shows any case's)."""
    from oloproof_core.cli.streams import escape_controls
    from oloproof_core.outputs.case import traceback_lines

    raised = [r for r in store.run_cases(run_id) if r.get("traceback")]
    for record in raised[:shown]:
        lines = [f"Case {record['id']}: {record.get('missing')}",
                 *traceback_lines(record["traceback"], "  ", 100)]
        click.echo(escape_controls("\n".join(lines)), err=True)
    if len(raised) > shown:
        click.echo(f"{len(raised) - shown} more cases raised; `oloproof inspect {run_id} --case ID` shows each "
                   "one's traceback", err=True)


def oloproof_register_commands(cli) -> None:
    cli.add_command(run)
