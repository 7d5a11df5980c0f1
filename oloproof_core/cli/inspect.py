"""`oloproof inspect`: a run, its failures or one case, or a stored comparison or diagnosis."""

from __future__ import annotations

import click

from oloproof_core.cli.common import config_option, echo, echo_stream, find_case, format_option, store_option
from oloproof_core.model.errors import OloproofError
from oloproof_core.workflows.project import Project


@click.command()
@click.argument("run_or_object_id")
@click.option("--failures", is_flag=True,
              help="List the cases that failed, errored or did not finish, then why: each one's expected "
                   "value and each criterion's reason.")
@click.option("--case", "case_id", metavar="ID",
              help="Show one case: input, expected, output, the retrieval, context and citations, and each judgment "
                   "with its reason (with --format json: the stored record, unchanged).")
@format_option
@config_option
@store_option
def inspect(run_or_object_id: str, failures: bool, case_id: str | None, fmt: str, config: str | None,
            store_spec: str | None) -> None:
    """Show a run (its failures, or one case), or a stored comparison or diagnosis (sha256:...)."""
    import json
    from oloproof_core.outputs.report import is_failure, render_failures, subset_line

    store = Project(config, store_spec, existing=True).reader()
    if run_or_object_id.startswith("sha256:"):
        object_id, kind, record = store.get_object(run_or_object_id)
        if fmt == "json":
            click.echo(json.dumps({"id": object_id, "kind": kind, "record": record}, indent=2, ensure_ascii=False))
        elif kind == "diagnosis" and "selected" in record:
            from oloproof_core.outputs.diagnosis import inspect_lines

            echo(inspect_lines(record))
        elif kind == "headroom":
            from oloproof_core.outputs.headroom import headroom_lines

            echo(headroom_lines(object_id, record))
        elif kind == "comparison":
            from oloproof_core.outputs.text import stored_comparison

            echo(stored_comparison(object_id, record))
        else:
            echo(record.get("lines", [json.dumps(record, indent=2, sort_keys=True)]))
        return
    from oloproof_core.storage.stores import resolve_reference

    run_id = resolve_reference(store, run_or_object_id)
    header, summary = store.get_run(run_id)
    # the run's records are streamed, never held: a run of a million cases reads in flat memory
    if case_id is not None:
        record = find_case(store, run_id, case_id)
        if record is None:
            raise OloproofError(f"run {run_id} has no case {case_id!r}",
                                fix="list its failing cases with --failures")
        if fmt == "json":  # the stored record, unchanged
            click.echo(json.dumps(record, indent=2, ensure_ascii=False))
        else:  # the viewer's case page, as text
            from oloproof_core.outputs.case import render_case
            from oloproof_core.outputs.terminal import text_width
            from oloproof_core.outputs.pages import case_view

            echo(render_case(case_view(store, lambda _: [record], run_id, case_id), text_width()))
    elif fmt == "json" and failures:
        from oloproof_core.outputs import to_json_chunks
        from oloproof_core.results.view import run_ref

        for chunk in to_json_chunks({"run": run_ref(header)}, "failures",
                                    (r for r in store.run_cases(run_id) if is_failure(r))):
            click.echo(chunk, nl=False)
    elif fmt == "json":
        from oloproof_core.outputs import to_json
        from oloproof_core.results.view import run_view

        click.echo(to_json(run_view(header, summary, store.run_cases(run_id))), nl=False)
    elif failures:
        echo_stream(render_failures(store.run_cases(run_id)))
    else:  # the header's case count; the first record asked for, so the store checks the run's seal
        from oloproof_core.outputs.report import unit_lines

        next(iter(store.run_cases(run_id)), None)
        echo([f"Run {run_id} [{summary['state']}]",
               f"System: {header['system']['name']} {header['system']['version']}",
               f"Cases: {header['cases']}", f"Gate: {summary['gate'] or 'none'}"]
              + ([subset_line(header["selection"], summary["gate"] is not None)] if header.get("selection") else [])
              + [f"{name}: {m['cells'][0]} {m['cells'][1]} · {m['cells'][2]}" for name, m in summary["metrics"].items()]
              # how the intervals were counted (Clusters:, Trials:, First failing turn:, Unstable:), as run printed it
              + [line for line in unit_lines(summary, header.get("design"), header.get("confidence_level", 0.95))
                 if line])


def oloproof_register_commands(cli) -> None:
    cli.add_command(inspect)
