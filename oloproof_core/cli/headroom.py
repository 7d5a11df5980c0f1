"""`oloproof headroom`: every case of a run under each chosen intervention, beside its control,
ranked by the lower bound of the gain."""

from __future__ import annotations

import click

from oloproof_core.cli.common import config_option, echo, format_option, store_option
from oloproof_core.cli.diagnose import build_intervention, intervention_options, run_suite
from oloproof_core.model.errors import OloproofError


def options_for(entry, given: dict) -> dict:
    """The options among ``given`` that the intervention ``entry`` takes (``--top-k`` is the
    top-k intervention's, ``--token-budget`` the token-budget one's)."""
    import attrs

    if entry.options is None:
        return {}
    names = {f.name for f in attrs.fields(entry.options)}
    return {k: v for k, v in given.items() if k in names}


@click.command()
@click.argument("run_id")
@click.option("--intervention", "names", required=True, multiple=True, metavar="NAME",
              help="An intervention to measure; repeat for several (gold-context, top-k, token-budget, reranker, "
                   "or one a plugin adds).")
@click.option("--criterion", required=True, metavar="NAME", help="The criterion whose paired difference is measured.")
@click.option("--top-k", "top_k", type=int, default=None, help="top-k: the wider cut-off to replay with.")
@click.option("--token-budget", "token_budget", type=int, default=None,
              help="token-budget: the larger budget to replay with.")
@click.option("--reranker", default=None, metavar="MODULE:FUNCTION", help="reranker: (input, candidates) -> candidates.")
@click.option("--option", "extra", multiple=True, metavar="KEY=VALUE",
              help="An option of a plugin's intervention (given to each intervention that takes KEY).")
@click.option("--confidence", type=float, default=0.95, show_default=True, help="The intervals' confidence level.")
@click.option("--until-decided", "until_decided", is_flag=True,
              help="Stop each intervention once its interval excludes zero (or lies below --margin).")
@click.option("--margin", type=float, default=None, metavar="POINTS",
              help="With --until-decided: also stop once the whole interval lies below this gain, in points.")
@click.option("--batch", type=int, default=10, show_default=True, help="With --until-decided: cases between looks.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="With --until-decided: the seed of the order the cases run in.")
@click.option("--markdown", metavar="FILE", default=None, help="Also write the headroom as Markdown to FILE.")
@format_option
@config_option
@store_option
def headroom(run_id: str, names: tuple[str, ...], criterion: str, top_k: int | None, token_budget: int | None,
             reranker: str | None, extra: tuple[str, ...], confidence: float, until_decided: bool,
             margin: float | None, batch: int, seed: int, markdown: str | None, fmt: str, config: str | None,
             store_spec: str | None) -> None:
    """Re-execute every case of RUN_ID under each intervention, beside its control, and rank the
    interventions by the lower bound of their paired gain on the criterion."""
    from oloproof_core.outputs.headroom import headroom_document, summary_lines
    from oloproof_core.workflows.headroom import Headroom

    from oloproof_core.model.errors import ConfigError

    if margin is not None and not until_decided:
        raise ConfigError("--margin applies to --until-decided only", where="--margin",
                          fix="add --until-decided, or remove --margin")
    if margin is not None and not 0 < margin <= 100:
        raise ConfigError(f"--margin must be between 0 and 100 points, got {margin}", where="--margin",
                          fix="write --margin 5")
    sequential = {"seed": seed, "batch": batch, "margin": None if margin is None else margin / 100} \
        if until_decided else None
    if markdown:
        from oloproof_core.config.files import regular_target

        regular_target(markdown, "--markdown")  # refused before anything is re-executed
    project, run_id, suite = run_suite(run_id, config, store_spec)
    interventions = project.plugins.interventions
    entries = {name: interventions.get(name) for name in dict.fromkeys(names)}  # unknown names stop first
    given = intervention_options(top_k, token_budget, reranker, extra)
    taken = {k for entry in entries.values() for k in options_for(entry, given)}
    unused = sorted(set(given) - taken)
    if unused:
        flag = {"top_k": "--top-k", "token_budget": "--token-budget", "reranker": "--reranker"}.get(
            unused[0], f"--option {unused[0]}")
        raise OloproofError(f"no chosen intervention takes {flag}", fix="remove it, or add the intervention that does")
    made = []
    for name, entry in entries.items():
        options = options_for(entry, given)
        made.append((build_intervention(project.plugins, name, options), options))
    measured = Headroom(suite, project.plugins, project.store, run_id, criterion, confidence, sequential)
    object_id, record = measured.measure(made)
    if markdown:
        from oloproof_core.outputs import write_text
        from oloproof_core.outputs.headroom import headroom_markdown

        write_text(markdown, headroom_markdown(object_id, record))
    if fmt == "json":
        from oloproof_core.outputs import to_json

        click.echo(to_json(headroom_document(object_id, record)), nl=False)
    else:
        echo(summary_lines(object_id, record))


def oloproof_register_commands(cli) -> None:
    cli.add_command(headroom)
