"""`oloproof diagnose`: re-execute a run's failed cases under an intervention beside a control."""

from __future__ import annotations


import click

from oloproof_core.cli.common import config_option, echo, store_option
from oloproof_core.model.errors import ConfigError, OloproofError
from oloproof_core.workflows.project import Project


@click.command()
@click.argument("run_id")
@click.option("--intervention", required=True, metavar="NAME",
              help="gold-context, top-k, reranker, token-budget, or one a plugin adds.")
@click.option("--criterion", required=True, metavar="NAME", help="Diagnose the cases that failed this criterion.")
@click.option("--top-k", "top_k", type=int, default=None, help="top-k: the wider cut-off to replay with.")
@click.option("--token-budget", "token_budget", type=int, default=None,
              help="token-budget: the larger budget to replay with.")
@click.option("--reranker", default=None, metavar="MODULE:FUNCTION", help="reranker: (input, candidates) -> candidates.")
@click.option("--option", "extra", multiple=True, metavar="KEY=VALUE", help="An option of a plugin's intervention.")
@click.option("--case", "only", multiple=True, metavar="ID",
              help="Diagnose this failed case only (repeat for more); a conversation's turn is CONV#K.")
@config_option
@store_option
def diagnose(run_id: str, intervention: str, criterion: str, top_k: int | None, token_budget: int | None,
             reranker: str | None, extra: tuple[str, ...], only: tuple[str, ...], config: str | None,
             store_spec: str | None) -> None:
    """Re-execute RUN_ID's failed cases under an intervention, beside a control, and label them."""
    from oloproof_core.workflows.diagnose import Diagnosis
    from oloproof_core.outputs.diagnosis import diagnosis_lines

    project, run_id, suite = run_suite(run_id, config, store_spec)
    store = project.store
    project.plugins.interventions.get(intervention)  # an unknown name stops the command first
    options = intervention_options(top_k, token_budget, reranker, extra)
    made = build_intervention(project.plugins, intervention, options)
    object_id, record = Diagnosis(suite, project.plugins, store, run_id, criterion, options, only).run(made)
    interventions = project.plugins.interventions
    declared = {name: {key: getattr(interventions.get(name).factory, key, None) for key in ("tests", "confirms", "usage")}
                for name in interventions.names()}
    echo(diagnosis_lines(object_id, record, declared))


def run_suite(run_id: str, config: str | None, store_spec: str | None):
    """(the project, the full run id, the suite) to re-execute RUN_ID with: the config the run was
    made with, and the executor it ran on."""
    from oloproof_core.engine.suite import load_suite

    project = Project(config, store_spec, existing=True)
    from oloproof_core.storage.stores import resolve_reference

    run_id = resolve_reference(project.store, run_id)
    recorded = project.store.get_run(run_id)[0].get("config")
    if config is None and recorded and recorded != project.config_path.name and (project.dir / recorded).is_file():
        project = Project(str(project.dir / recorded), store_spec)  # diagnose a run with the config it was made with
    doc, skeleton = project.skeleton()
    # re-executed where the run executed (`--executor ray`, say), whatever the suite says now
    suite = load_suite(project.config_path, project.plugins, doc, skeleton, project.store,
                       executor=project.store.get_run(run_id)[0].get("executor"))
    return project, run_id, suite


FLAGS = {"top_k": "--top-k", "token_budget": "--token-budget", "reranker": "--reranker"}


def build_intervention(plugins, intervention: str, options: dict):
    """The intervention ``intervention`` built from its plain options; an error names the
    command-line flag it came from."""
    from oloproof_core.engine.work import make_intervention

    flags = FLAGS
    entry = plugins.interventions.get(intervention)
    if entry.options is None:
        if options:
            name = sorted(options)[0]
            raise OloproofError(f"intervention {intervention!r} takes no option {flags.get(name, '--option ' + name)}",
                                fix="remove it")
    try:
        return make_intervention(plugins, intervention, options)
    except ConfigError as exc:  # located as a YAML path; say which command-line flag it was
        name = (exc.where or "").removeprefix("$").removeprefix(".").split(".")[0].split("[")[0]
        flag = flags.get(name, f"--option {name}") if name else f"--intervention {intervention}"
        fix = exc.fix
        if exc.problem.startswith("missing required key"):
            key = exc.problem.split("'")[1]
            fix = f"pass {flags.get(key, '--option ' + key + '=VALUE')}" + (
                " N" if key in ("top_k", "token_budget") else "")
        raise ConfigError(exc.problem, where=flag, fix=fix) from None


def intervention_options(top_k: int | None, token_budget: int | None, reranker: str | None,
                         extra: tuple[str, ...]) -> dict:
    """The interventions' options from ``--top-k``, ``--token-budget``, ``--reranker`` and each
    ``--option KEY=VALUE`` (its value read as YAML)."""
    options = {k: v for k, v in (("top_k", top_k), ("token_budget", token_budget), ("reranker", reranker))
               if v is not None}
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep:
            raise OloproofError(f"--option {item!r} is not KEY=VALUE", fix="write --option key=value")
        options[key] = _option_value(key, value)
    return options


def _option_value(key: str, value: str):
    """The value of ``--option key=VALUE``, read as YAML (``3``, ``true``, ``[a, b]``), bounded like
    any YAML the suite reads."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from oloproof_core.config.files import MAX_DEPTH

    if len(value) > 10_000 or value.count("[") + value.count("{") > MAX_DEPTH or ("&" in value and "*" in value):
        raise ConfigError("the value is too long, too deeply nested, or uses YAML anchors",
                          where=f"--option {key}", fix="pass a plain value: a number, a word, a short list")
    try:
        return YAML(typ="safe").load(value)
    except (YAMLError, RecursionError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"invalid YAML value {value!r}: {problem}", where=f"--option {key}",
                          fix="quote the value, or write it as YAML (3, true, [a, b])") from None


def oloproof_register_commands(cli) -> None:
    cli.add_command(diagnose)
