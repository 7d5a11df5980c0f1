"""`oloproof cases from-traces FILE`: production traces become a cases file (docs/traces.md)."""

from __future__ import annotations

from pathlib import Path

import click

from oloproof_core.cli.common import config_option, echo


@click.group()
def cases() -> None:
    """Make cases files."""


@cases.command("from-traces")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "-o", default="cases.from-traces.jsonl", show_default=True, metavar="FILE",
              help="The cases file to write (JSONL).")
@click.option("--receiver", default="otlp", show_default=True, metavar="NAME",
              help="The trace receiver that reads the file (its format).")
@click.option("--mapping", "mappings", multiple=True, metavar="NAME",
              help="A span mapping to read the spans with (repeatable); every installed one by default.")
@click.option("--where", "where", multiple=True, metavar="ATTRIBUTE=VALUE",
              help="Keep only traces with a span whose attribute has this value (repeatable: all must hold).")
@click.option("--redact", "redact", multiple=True, metavar="PATTERN",
              help="Replace the attributes whose name matches this glob (user.*) by [redacted] before "
                   "anything is read or written (repeatable).")
@click.option("--sample", type=int, default=None, metavar="N", help="Keep N traces, chosen with --seed.")
@click.option("--seed", type=int, default=0, show_default=True, help="The seed of --sample.")
@config_option
def from_traces(file: str, output: str, receiver: str, mappings: tuple[str, ...], where: tuple[str, ...],
                redact: tuple[str, ...], sample: int | None, seed: int, config: str | None) -> None:
    """Write a cases file from exported traces (OTLP/JSON): each trace's question as the input, its
    answer as metadata.production_answer, its retrieval as metadata.recorded_retrieval."""
    import json
    from oloproof_core.model.errors import ConfigError
    from oloproof_core.workflows.project import Project
    from oloproof_core.workflows.traces import cases_from_spans

    plugins = Project(config).plugins
    entry = plugins.trace_receivers.get(receiver, where="--receiver")
    read = entry.extra.get("read_file")
    if read is None:
        raise ConfigError(f"trace receiver {receiver!r} cannot read files", where="--receiver",
                          fix="use --receiver otlp (OTLP/JSON files)")
    names = list(mappings) or plugins.span_mappings.names()
    made = {name: plugins.span_mappings.get(name, where="--mapping").factory() for name in names}
    try:
        spans = read(Path(file).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file} is not an OTLP/JSON file: {exc}", where=file,
                          fix="give a file the collector's file exporter wrote (one export request a line)") from None
    rows, figures = cases_from_spans(spans, made, where=where, redact_patterns=redact, sample=sample, seed=seed)
    Path(output).write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    echo([f"Wrote {figures['cases']} cases to {output} from {figures['traces']} traces "
          f"({figures['matched']} matched --where, {figures['no_question']} without a question)"])


def oloproof_register_commands(cli) -> None:
    cli.add_command(cases)
