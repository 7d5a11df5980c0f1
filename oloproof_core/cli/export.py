"""`oloproof export`: a run's bundle (cases.jsonl, run.json), or one self-contained HTML report."""

from __future__ import annotations

import click

from oloproof_core.cli.common import config_option, store_option
from oloproof_core.model.errors import ConfigError
from oloproof_core.workflows.project import Project


HTML_CASES = 10_000  # the largest run `export --html` writes (every case's page in one file)


@click.command()
@click.argument("run_id")
@click.option("--html", "html_file", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="Write one self-contained HTML report instead (a run, or a sha256:... comparison or diagnosis).")
@config_option
@store_option
def export(run_id: str, html_file: str | None, config: str | None, store_spec: str | None) -> None:
    """Write a run's bundle: .oloproof/bundles/RUN_ID/cases.jsonl and run.json (or --html FILE)."""
    import json
    from oloproof_core.config.files import bundle_folder, write_file

    if html_file is not None:
        from oloproof_core.config.files import regular_target

        regular_target(html_file, "--html")
    project = Project(config, store_spec, existing=True)
    store = project.reader()
    if html_file is not None:
        from oloproof_core.outputs import ReportContext

        if not run_id.startswith("sha256:"):  # a report that holds every case's page: see docs/viewer.md
            from oloproof_core.storage.stores import resolve_reference

            run_id = shown = resolve_reference(store, run_id)
            cases = int(store.get_run(shown)[0].get("cases") or 0)
            if cases > HTML_CASES:
                raise ConfigError(f"run {shown} has {cases:,} cases, and an HTML report, which holds every case's "
                                  f"page, is made for runs of up to {HTML_CASES:,}", where="--html",
                                  fix=f"write the bundle with `oloproof export {shown}` (cases.jsonl), or list the "
                                      f"failures with `oloproof inspect {shown} --failures`")
        reporter = project.plugins.reporters.get("html", where="--html").factory(None)
        reporter.write({}, html_file, context=ReportContext(store, project.plugins, run_id))
        click.echo(f"Wrote {html_file}")
        return
    from oloproof_core.storage.stores import resolve_reference

    run_id = resolve_reference(store, run_id)
    header, summary = store.get_run(run_id)
    folder = bundle_folder(project.dir, run_id)
    count = 0

    def lines():
        nonlocal count
        for record in store.run_cases(run_id):
            case = record["case"]
            line = {"id": record["id"], "input": case["input"], "expected": case["expected"],
                    "metadata": case["metadata"], "output": record.get("output"),
                    "artifacts": record.get("artifacts", {}), "judgments": record["judgments"]}
            if case.get("history"):  # a conversation's later turn: the earlier turns it was given
                line["history"] = case["history"]
            if "missing" in record:
                line["missing"] = record["missing"]
            if "escaped" in record:  # where a lone surrogate from outside was escaped
                line["escaped"] = record["escaped"]
            if "unrecorded" in record:  # a traced case whose spans never came (docs/traces.md)
                line["unrecorded"] = record["unrecorded"]
            count += 1
            # allow_nan=False: a bundle is JSON any strict parser reads
            yield json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n"

    write_file(folder, "cases.jsonl", lines())
    write_file(folder, "run.json", [json.dumps({"run": header, "summary": summary}, indent=2, sort_keys=True,
                                               allow_nan=False) + "\n"])
    click.echo(f"Exported {count} cases of {run_id} to {folder.relative_to(project.dir)}/cases.jsonl")


def oloproof_register_commands(cli) -> None:
    cli.add_command(export)
