"""The ``oloproof`` command. Parses arguments, calls the engine, maps errors to exit codes.

Heavy modules (scipy, httpx, the plugins) are imported only by the commands that need them, so
``oloproof --help`` starts fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from .errors import ConfigError, ExitCode, OloproofError, error_line
from .outputs.options import output_options, outputs_wanted


def _echo(lines) -> None:
    """Print ``lines``; on a terminal, tables fit its width and verdicts are coloured."""
    from .outputs.terminal import shown

    click.echo("\n".join(shown(list(lines))))


def _echo_stream(lines, chunk: int = 1000) -> None:
    """Print ``lines`` as they come, a thousand at a time, as :func:`_echo` would (for listings
    with no table, which is fitted to the terminal whole)."""
    from itertools import islice

    lines = iter(lines)
    while part := list(islice(lines, chunk)):
        _echo(part)


class Project:
    """The project a command works on: its config file, plugins and store, opened lazily."""

    def __init__(self, config: str | None, store: str | None = None, existing: bool = False):
        """:param existing: the command reads a project (runs, inspect, compare, ...): without its
        config file or a local store here, and with no other store named, it stops before
        anything is created."""
        self.store_spec = store  # --store: beats the suite's store and OLOPROOF_STORE
        self.config_path = Path(config or "oloproof.yaml")
        if existing and store is None and not self.config_path.is_file():
            if config is not None or not Path(".oloproof").is_dir():  # runs made with another --config
                _no_project(config)
        try:
            self.dir = self.config_path.resolve().parent
        except (RuntimeError, OSError):  # a symbolic link loop: reading it says so, in one line
            from .files import read_text

            read_text(self.config_path, limit=1, fix="pass another file with --config")
            raise
        self._skeleton = None
        self._plugins = None
        self._store = None

    def skeleton(self):
        from .suite import load_skeleton

        if self._skeleton is None:
            self._skeleton = load_skeleton(self.config_path)
        return self._skeleton

    @property
    def plugins(self):
        if self._plugins is None:
            from .plugins import Plugins, disabled_from_env, make_plugin_manager

            disabled = disabled_from_env()
            if self.config_path.is_file():
                disabled += self.skeleton()[1].disable_plugins
            self._plugins = Plugins(make_plugin_manager(disabled=disabled))
        return self._plugins

    def reader(self):
        """The store opened read-only, for the commands that only read it."""
        if self._store is None:
            store = self.store
            if hasattr(store, "read_only"):
                store.read_only = True
        return self._store

    @property
    def store(self):
        """``--store``, else the suite's ``store:``, else ``OLOPROOF_STORE``, else the local store."""
        if self._store is None:
            from .stores import from_environment, open_spec, open_store
            from .suite import _options

            if self.store_spec is not None:
                self._store = open_spec(self.plugins, self.dir, self.store_spec, "--store")
                return self._store
            doc = None
            if self.config_path.is_file():
                doc, skeleton = self.skeleton()
            if doc is not None and isinstance(doc.data, dict) and "store" in doc.data:
                data = dict(skeleton.store)
                store_type = data.pop("type", "local")
                entry = self.plugins.stores.get(store_type, where=doc.where(("store", "type")))
                self._store = open_store(entry, _options(doc, entry, data, ("store",), f"store {store_type!r}"), self.dir)
            else:
                self._store = from_environment(self.plugins, self.dir)
            if self._store is None:
                entry = self.plugins.stores.get("local")
                options = _options(doc, entry, {}, ("store",), "store 'local'") if doc else None
                self._store = open_store(entry, options, self.dir)
        return self._store


def _no_project(config: str | None) -> None:
    """A command that reads a project's runs, run where there is none: say so, create nothing."""
    import os

    if config is not None:
        raise ConfigError(f"no config file {config}", where="--config",
                          fix="pass the path of an existing oloproof.yaml, or create one with `oloproof init`")
    if os.environ.get("OLOPROOF_STORE"):
        return  # the team's store, named in the environment: no project file needed to read it
    raise ConfigError("no oloproof.yaml here, so there is no project to read",
                      fix="cd to the project's directory, pass --config FILE, or create a project with "
                          "`oloproof init --template callable DIR`")


config_option = click.option("--config", "config", metavar="FILE", default=None,
                             help="The suite's config file (default: oloproof.yaml in this directory).")
format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                             help="text (the default), or json: one JSON document, for scripts.")
store_option = click.option("--store", "store_spec", metavar="STORE", default=None,
                            help="The store: local, a postgresql:// URL, or {type: ..., ...} (default: the suite's "
                                 "store:, else $OLOPROOF_STORE, else local).")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="oloproof")
def cli() -> None:
    """Evaluate a RAG or LLM system: run a suite, gate a release, compare runs, diagnose failures.

    Add --debug to any command to see the traceback behind an error.
    """


@cli.command()
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
@output_options
@store_option
def run(config: str | None, no_cache: bool, refresh: bool, reuse_executions: bool, until_decided: bool,
        seed: int | None, batch: int | None, limit: int | None, filters: tuple[str, ...], sample: int | None,
        trials: int | None, executor: str | None, junit: str | None, junit_cases: bool, json_file: str | None,
        markdown: str | None, store_spec: str | None) -> None:
    """Run the suite (or a subset of its cases), print metrics with intervals, and decide the gate."""
    from .outputs.terminal import Progress
    from .report import render_run
    from .runner import run_suite
    from .selection import Selection, select_suite
    from .sequential import plan
    from .suite import load_suite

    if refresh and reuse_executions:
        raise click.UsageError("--refresh and --reuse-executions contradict each other; give one")
    wanted = outputs_wanted(junit, junit_cases, json_file, markdown)
    project = Project(config, store_spec)
    doc, skeleton = project.skeleton()
    executions = "refresh" if refresh else "reuse" if reuse_executions else None
    suite = load_suite(project.config_path, project.plugins, doc, skeleton, project.store, use_cache=not no_cache,
                       executions=executions, trials=trials, executor=executor)
    suite, selection = select_suite(suite, Selection(limit=limit, filters=filters, sample=sample, seed=seed))
    sequential = plan(suite, until_decided, seed if until_decided or sample is None else None, batch)
    progress = Progress()  # on standard error when it is a terminal
    outcome = run_suite(suite, project.plugins, project.store, use_cache=not no_cache, sequential=sequential,
                        selection=selection, progress=progress if progress.on else None)
    _echo(render_run(outcome, suite.min_slice_support))
    if wanted:  # from the stored run: the files say what `inspect` and `export` say
        from .outputs import write_outputs
        from .outputs.view import run_view

        header, summary = project.store.get_run(outcome.run_id)
        cases = project.store.run_cases  # streamed: once for the view, once more for --junit-cases
        write_outputs(run_view(header, summary, cases(outcome.run_id)), junit=junit, json_file=json_file,
                      markdown=markdown, records=cases(outcome.run_id) if junit_cases else None)
    _warn_damaged(project.store)
    sys.exit(int(outcome.exit_code))


def _warn_damaged(store) -> None:
    damaged = getattr(store, "damaged", None)
    if damaged:
        counts = ", ".join(f"{n} {ns}" for ns, n in sorted(damaged.items()))
        click.echo(f"warning: cached values failed their checksum and were recomputed ({counts}); "
                   "run `oloproof store check`", err=True)


@cli.command()
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
    from .report import is_failure, render_failures, subset_line

    store = Project(config, store_spec, existing=True).reader()
    if run_or_object_id.startswith("sha256:"):
        object_id, kind, record = store.get_object(run_or_object_id)
        if fmt == "json":
            click.echo(json.dumps({"id": object_id, "kind": kind, "record": record}, indent=2, ensure_ascii=False))
        elif kind == "diagnosis" and "selected" in record:
            from .diagnose_report import inspect_lines

            _echo(inspect_lines(record))
        elif kind == "comparison":
            from .outputs.text import stored_comparison

            _echo(stored_comparison(object_id, record))
        else:
            _echo(record.get("lines", [json.dumps(record, indent=2, sort_keys=True)]))
        return
    run_id = store.resolve_run(run_or_object_id)
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
            from .outputs.case import render_case
            from .outputs.terminal import text_width
            from .views import case_view

            _echo(render_case(case_view(store, lambda _: [record], run_id, case_id), text_width()))
    elif fmt == "json" and failures:
        from .outputs import to_json_chunks
        from .outputs.view import run_ref

        for chunk in to_json_chunks({"run": run_ref(header)}, "failures",
                                    (r for r in store.run_cases(run_id) if is_failure(r))):
            click.echo(chunk, nl=False)
    elif fmt == "json":
        from .outputs import to_json
        from .outputs.view import run_view

        click.echo(to_json(run_view(header, summary, store.run_cases(run_id))), nl=False)
    elif failures:
        _echo_stream(render_failures(store.run_cases(run_id)))
    else:  # the header's case count; the first record asked for, so the store checks the run's seal
        next(iter(store.run_cases(run_id)), None)
        _echo([f"Run {run_id} [{summary['state']}]",
               f"System: {header['system']['name']} {header['system']['version']}",
               f"Cases: {header['cases']}", f"Gate: {summary['gate'] or 'none'}"]
              + ([subset_line(header["selection"], summary["gate"] is not None)] if header.get("selection") else [])
              + [f"{name}: {m['cells'][0]} {m['cells'][1]} · {m['cells'][2]}" for name, m in summary["metrics"].items()])


def find_case(store, run_id: str, case_id: str) -> dict | None:
    """One case record of a run: by the store's ``run_case`` when it has one, else the first record
    of ``run_cases`` with that id (the scan stops there)."""
    lookup = getattr(store, "run_case", None)
    if lookup is not None:
        return lookup(run_id, case_id)
    return next((r for r in store.run_cases(run_id) if r["id"] == case_id), None)


HTML_CASES = 10_000  # the largest run `export --html` writes (every case's page in one file)


@cli.command()
@click.argument("run_id")
@click.option("--html", "html_file", default=None, metavar="FILE", type=click.Path(dir_okay=False),
              help="Write one self-contained HTML report instead (a run, or a sha256:... comparison or diagnosis).")
@config_option
@store_option
def export(run_id: str, html_file: str | None, config: str | None, store_spec: str | None) -> None:
    """Write a run's bundle: .oloproof/bundles/RUN_ID/cases.jsonl and run.json (or --html FILE)."""
    from .files import bundle_folder, write_file

    project = Project(config, store_spec, existing=True)
    store = project.reader()
    if html_file is not None:
        from .viewer import export_html

        if not run_id.startswith("sha256:"):  # a report that holds every case's page: see docs/viewer.md
            shown = store.resolve_run(run_id)
            cases = int(store.get_run(shown)[0].get("cases") or 0)
            if cases > HTML_CASES:
                raise ConfigError(f"run {shown} has {cases:,} cases, and an HTML report, which holds every case's "
                                  f"page, is made for runs of up to {HTML_CASES:,}", where="--html",
                                  fix=f"write the bundle with `oloproof export {shown}` (cases.jsonl), or list the "
                                      f"failures with `oloproof inspect {shown} --failures`")
        target = Path(html_file).resolve()
        write_file(target.parent, target.name, [export_html(store, project.plugins, run_id)])
        click.echo(f"Wrote {html_file}")
        return
    run_id = store.resolve_run(run_id)
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
            if "missing" in record:
                line["missing"] = record["missing"]
            count += 1
            # allow_nan=False: a bundle is JSON any strict parser reads
            yield json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n"

    write_file(folder, "cases.jsonl", lines())
    write_file(folder, "run.json", [json.dumps({"run": header, "summary": summary}, indent=2, sort_keys=True,
                                               allow_nan=False) + "\n"])
    click.echo(f"Exported {count} cases of {run_id} to {folder.relative_to(project.dir)}/cases.jsonl")


@cli.command()
@click.argument("candidate")
@click.argument("baseline")
@click.option("--policy", "policy_file", required=True, type=click.Path(dir_okay=False),
              help="The comparison policy (version, confidence_level, block_on, rules).")
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
            json_file: str | None, markdown: str | None, config: str | None,
            store_spec: str | None) -> None:
    """Compare CANDIDATE with BASELINE case by case and decide the comparison policy.

    After the gate line come the cases that changed verdict: fixed (passing now) or broken.
    """
    from .compare import compare_runs, load_compare_policy
    from .outputs.text import render_comparison

    wanted = outputs_wanted(junit, junit_cases, json_file, markdown)
    project = Project(config, store_spec, existing=True)
    policy = load_compare_policy(Path(policy_file))  # a bad policy file stops the command before the store
    store = project.store
    candidate, baseline = store.resolve_run(candidate), store.resolve_run(baseline)
    view, record = compare_runs(store, project.plugins, candidate, baseline, policy, allow_different_evaluators)
    store.put_object("comparison", view["id"], record)
    if fmt == "json":
        from .outputs import to_json

        click.echo(to_json(view), nl=False)
    else:
        _echo(render_comparison(view, show_slices, show_cases))
    if wanted:  # --junit-cases: the candidate's cases
        from .outputs import write_outputs

        write_outputs(view, junit=junit, json_file=json_file, markdown=markdown,
                      records=store.run_cases(candidate) if junit_cases else None)
    sys.exit(view["exit_code"])


@cli.command()
@click.argument("run_id")
@click.option("--intervention", required=True, metavar="NAME",
              help="gold-context, top-k, reranker, token-budget, or one a plugin adds.")
@click.option("--criterion", required=True, metavar="NAME", help="Diagnose the cases that failed this criterion.")
@click.option("--top-k", "top_k", type=int, default=None, help="top-k: the wider cut-off to replay with.")
@click.option("--token-budget", "token_budget", type=int, default=None,
              help="token-budget: the larger budget to replay with.")
@click.option("--reranker", default=None, metavar="MODULE:FUNCTION", help="reranker: (input, candidates) -> candidates.")
@click.option("--option", "extra", multiple=True, metavar="KEY=VALUE", help="An option of a plugin's intervention.")
@config_option
@store_option
def diagnose(run_id: str, intervention: str, criterion: str, top_k: int | None, token_budget: int | None,
             reranker: str | None, extra: tuple[str, ...], config: str | None, store_spec: str | None) -> None:
    """Re-execute RUN_ID's failed cases under an intervention, beside a control, and label them."""
    from .diagnose import Diagnosis
    from .diagnose_report import diagnosis_lines
    from .execution import make_intervention
    from .suite import load_suite

    project = Project(config, store_spec, existing=True)
    run_id = project.store.resolve_run(run_id)
    recorded = project.store.get_run(run_id)[0].get("config")
    if config is None and recorded and recorded != project.config_path.name and (project.dir / recorded).is_file():
        project = Project(str(project.dir / recorded), store_spec)  # diagnose a run with the config it was made with
    store = project.store
    doc, skeleton = project.skeleton()
    # re-executed where the run executed (`--executor ray`, say), whatever the suite says now
    suite = load_suite(project.config_path, project.plugins, doc, skeleton, store,
                       executor=store.get_run(run_id)[0].get("executor"))
    entry = project.plugins.interventions.get(intervention)
    options = {k: v for k, v in (("top_k", top_k), ("token_budget", token_budget), ("reranker", reranker))
               if v is not None}
    for item in extra:
        key, sep, value = item.partition("=")
        if not sep:
            raise OloproofError(f"--option {item!r} is not KEY=VALUE", fix="write --option key=value")
        options[key] = _option_value(key, value)
    flags = {"top_k": "--top-k", "token_budget": "--token-budget", "reranker": "--reranker"}
    if entry.options is None:
        if options:
            name = sorted(options)[0]
            raise OloproofError(f"intervention {intervention!r} takes no option {flags.get(name, '--option ' + name)}",
                                fix="remove it")
    try:
        made = make_intervention(project.plugins, intervention, options)
    except ConfigError as exc:  # located as a YAML path; say which command-line flag it was
        name = (exc.where or "").removeprefix("$").removeprefix(".").split(".")[0].split("[")[0]
        flag = flags.get(name, f"--option {name}") if name else f"--intervention {intervention}"
        fix = exc.fix
        if exc.problem.startswith("missing required key"):
            key = exc.problem.split("'")[1]
            fix = f"pass {flags.get(key, '--option ' + key + '=VALUE')}" + (
                " N" if key in ("top_k", "token_budget") else "")
        raise ConfigError(exc.problem, where=flag, fix=fix) from None
    object_id, record = Diagnosis(suite, project.plugins, store, run_id, criterion, options).run(made)
    interventions = project.plugins.interventions
    declared = {name: {key: getattr(interventions.get(name).factory, key, None) for key in ("tests", "confirms", "usage")}
                for name in interventions.names()}
    _echo(diagnosis_lines(object_id, record, declared))


def _option_value(key: str, value: str):
    """The value of ``--option key=VALUE``, read as YAML (``3``, ``true``, ``[a, b]``), bounded like
    any YAML the suite reads."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from .files import MAX_DEPTH

    if len(value) > 10_000 or value.count("[") + value.count("{") > MAX_DEPTH or ("&" in value and "*" in value):
        raise ConfigError("the value is too long, too deeply nested, or uses YAML anchors",
                          where=f"--option {key}", fix="pass a plain value: a number, a word, a short list")
    try:
        return YAML(typ="safe").load(value)
    except (YAMLError, RecursionError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"invalid YAML value {value!r}: {problem}", where=f"--option {key}",
                          fix="quote the value, or write it as YAML (3, true, [a, b])") from None


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", default=8765, show_default=True, type=int, help="The port (0 picks a free one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in a web browser.")
@config_option
@store_option
def view(host: str, port: int, open_browser: bool, config: str | None, store_spec: str | None) -> None:
    """Serve a read-only web viewer of this project's runs, cases, comparisons and diagnoses."""
    from .viewer import serve

    project = Project(config, store_spec, existing=True)

    def announce(url: str) -> None:
        click.echo(f"Oloproof viewer on {url} (read-only; Ctrl-C stops it)")

    serve(project.reader(), project.plugins, host, port, announce, open_browser)


@cli.command()
@format_option
@config_option
@store_option
def runs(fmt: str, config: str | None, store_spec: str | None) -> None:
    """List the runs stored in this project (`latest` names the newest one in any command).

    The config column is a short hash of the system's identity (its settings and code), so two
    runs of the same code under different settings can be told apart.
    """
    from .report import table

    headers = Project(config, store_spec, existing=True).reader().list_runs()
    if fmt == "json":
        from .outputs.view import run_ref

        click.echo(json.dumps([run_ref(h) for h in headers], indent=2, ensure_ascii=False))
        return
    if not headers:
        click.echo("No runs yet; start one with `oloproof run`.")
        return
    from .identity import digest

    def origin(h: dict) -> str:
        return f"{h['role']} of {h['parent']}" if h.get("parent") else ""

    def cases(h: dict) -> str:  # a subset run never reads as a full one
        return f"{h['cases']} of {h['selection']['of']}" if h.get("selection") else str(h["cases"])

    _echo(table(["run", "created", "state", "system", "config", "cases", "diagnosis child"],
                [[h["id"], h["created"], h["state"], f"{h['system']['name']} {h['system']['version']}",
                  digest(h["system"].get("identity"))[:8], cases(h), origin(h)] for h in headers]))


@cli.group()
def store() -> None:
    """Create, migrate, check and copy the project's store."""


@store.command("init")
@config_option
@store_option
def store_init(config: str | None, store_spec: str | None) -> None:
    """Create the store's tables (a database store; the local store makes itself on first use)."""
    _schema_step(Project(config, store_spec).store, "init")


@store.command()
@config_option
@store_option
def migrate(config: str | None, store_spec: str | None) -> None:
    """Bring the store's tables to the version this oloproof needs (never done by a run)."""
    _schema_step(Project(config, store_spec).store, "migrate")


def _schema_step(store, step: str) -> None:
    action = getattr(store, step, None)
    if action is None:
        click.echo(f"Store {getattr(store, 'shown', type(store).__name__)}: nothing to {step}; "
                   "it keeps its own schema")
        return
    click.echo(action())


@store.command()
@click.option("--from", "source", metavar="STORE", default=None,
              help="The store to copy from (default: the project's store, as for every command).")
@click.option("--to", "target", metavar="STORE", required=True,
              help="The store to copy to: local, a postgresql:// URL, or {type: ..., ...}.")
@config_option
def copy(source: str | None, target: str, config: str | None) -> None:
    """Copy the runs and objects (comparisons, diagnoses, validations) the target lacks; copying
    again copies nothing. Caches are not copied."""
    from .stores import copy_runs

    origin = Project(config, source).reader()
    counts = copy_runs(origin, Project(config, target).store)
    there = counts["runs_there"] + counts["objects_there"]
    click.echo(f"Copied {counts['runs']} runs and {counts['objects']} objects"
               + (f" ({counts['runs_there']} runs and {counts['objects_there']} objects were there already)" if there else ""))


@store.command()
@config_option
@store_option
def check(config: str | None, store_spec: str | None) -> None:
    """Verify the whole store: every run against its seal, every cache value and object against
    its checksum, and the database file itself. Exit 0 when nothing is damaged, 2 otherwise."""
    store = Project(config, store_spec, existing=True).reader()
    checker = getattr(store, "check", None)
    if checker is None:
        raise OloproofError("this store cannot check itself", fix="use the local store")
    found = checker()
    counts = found["counts"]

    def n(count: int, noun: str) -> str:
        return f"{count} {noun}" + ("" if count == 1 else "s")

    lines = [f"Store {found['store']}: {n(counts['runs'], 'run')} ({n(counts['cases'], 'case record')}), "
             f"{n(counts['cache'], 'cached value')}, {n(counts['objects'], 'object')}"]
    if counts["unverified"]:
        lines.append(f"Unverified: {counts['unverified']}, stored before checksums existed")
    if counts.get("unfinished"):  # not damage: a run whose process ended before it finished
        rows = sum(u["cases"] for u in found.get("unfinished", ()))
        lines.append(f"Unfinished: {n(counts['unfinished'], 'run')} begun and not finished ({n(rows, 'case record')}, "
                     "seen by no command); the next run begun in this store removes those whose process has ended")
    lines += [f"Damaged: {problem}" for problem in found["problems"]]
    lines.append(f"{len(found['problems'])} damaged" if found["problems"] else "No damage found")
    _echo(lines)
    sys.exit(int(ExitCode.USAGE if found["problems"] else ExitCode.OK))


CACHE_NAMESPACES = ("execution", "judgment", "stage:retrieve", "stage:generate")


@cli.group(invoke_without_command=True)
@config_option
@store_option
@click.pass_context
def cache(ctx: click.Context, config: str | None, store_spec: str | None) -> None:
    """What the caches hold, per namespace; `oloproof cache clear NAMESPACE` empties one.

    Entries never go stale: a cache key covers the code and settings a result came from, so a
    change misses the cache by itself. Clearing only frees space, or forces an opaque system's
    reused executions to be sent again.
    """
    ctx.ensure_object(dict).update(config=config, store=store_spec)
    if ctx.invoked_subcommand is not None:
        return
    from .report import table

    store = Project(config, store_spec, existing=True).reader()
    stats = getattr(store, "cache_stats", None)
    if stats is None:
        raise OloproofError(f"the store {type(store).__name__} cannot list its caches", fix="use the local store")
    rows = {ns: (count, size) for ns, count, size in stats()}
    names = list(CACHE_NAMESPACES) + sorted(set(rows) - set(CACHE_NAMESPACES))
    _echo(table(["namespace", "entries", "size"],
                [[ns, f"{rows.get(ns, (0, 0))[0]:,}", _size(rows.get(ns, (0, 0))[1])] for ns in names]))


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1024 or unit == "GB":
            return f"{count:,} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    return str(count)


@cache.command("clear")
@click.argument("namespaces", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Clear every namespace (stored runs are kept).")
@click.pass_context
def cache_clear(ctx: click.Context, namespaces: tuple[str, ...], everything: bool) -> None:
    """Empty the cache NAMESPACES (execution, judgment, stage:retrieve, stage:generate)."""
    store = Project(ctx.obj.get("config"), ctx.obj.get("store"), existing=True).store
    known = {ns for ns, _, _ in store.cache_stats()} | set(CACHE_NAMESPACES)
    if everything:
        namespaces = tuple(sorted(known))
    if not namespaces:
        raise OloproofError("name the namespaces to clear", fix="e.g. `oloproof cache clear execution`, or --all")
    for ns in namespaces:
        if ns not in known:
            raise OloproofError(f"no cache namespace {ns!r}", fix=f"use one of: {', '.join(CACHE_NAMESPACES)}")
    for ns in namespaces:
        click.echo(f"Cleared {ns}: {store.cache_clear(ns):,} entries")


TEMPLATES = ("callable", "http", "rag")


@cli.command()
@click.option("--example", "example", default=None, metavar="NAME", help="The bundled example to copy.")
@click.option("--template", "template", default=None, type=click.Choice(TEMPLATES),
              help="A blank project for your own system: a function, a service, or a staged RAG class.")
@click.argument("directory", type=click.Path(file_okay=False))
def init(example: str | None, template: str | None, directory: str) -> None:
    """Copy a bundled example, or a blank template for your own system, into DIRECTORY."""
    import shutil
    from importlib.resources import as_file, files

    if (example is None) == (template is None):
        raise click.UsageError("give either --example NAME or --template callable|http|rag")
    root = files("oloproof_examples")
    if template is not None:
        root, example = root / "templates", template
    names = sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "oloproof.yaml").is_file())
    if example not in names:
        raise OloproofError(f"no example {example!r}", fix=f"use one of: {', '.join(names)}")
    target = Path(directory)
    if target.exists() and any(target.iterdir()):
        raise OloproofError(f"{directory} already exists and is not empty", fix="choose a new directory")
    with as_file(root / example) as source:
        shutil.copytree(source, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".oloproof", "*.pyc"))
    if template is not None:
        first = "python server.py & oloproof run" if template == "http" else "oloproof run"
        click.echo(f"Created {directory} from the blank {template} template. Edit "
                   f"{'oloproof.yaml' if template == 'http' else 'app.py'} and cases.jsonl, then: "
                   f"cd {directory} && {first}")
        return
    click.echo(f"Created {directory} from the {example} example. Next: cd {directory} && oloproof run")


@cli.command()
@config_option
def plugins(config: str | None) -> None:
    """List every discovered plugin, what it provides, and its distribution."""
    from .report import table

    rows = Project(config).plugins.listing()
    _echo(table(["plugin", "provides", "distribution"],
                [[r["plugin"], ", ".join(r["provides"]) or "hooks: " + ", ".join(r["hooks"]),
                  f"{r['distribution']} {r['version']}".strip()] for r in rows]))


@cli.group()
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
    from .suite import load_suite
    from .validation import validate_judge

    project = Project(config, store_spec)
    doc, skeleton = project.skeleton()
    suite = load_suite(project.config_path, project.plugins, doc, skeleton, project.store)
    lines, code, _, _ = validate_judge(suite, project.plugins, project.store, criterion, Path(labels_file), run_id)
    _echo(lines)
    sys.exit(int(code))


def _on_interrupt() -> None:
    """The first Ctrl-C stops the command cleanly (a run stores what finished and prints its
    report); a second one exits at once, with no traceback."""
    import os
    import signal

    def handler(signum, frame) -> None:
        if handler.count:
            os.write(2, b"Interrupted again: exiting now.\n")
            os._exit(ExitCode.INTERRUPTED)
        handler.count += 1
        raise KeyboardInterrupt

    handler.count = 0
    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread (an embedding test runner): keep Python's default
        pass


def _dispatch(debug: bool) -> int:
    try:
        cli.main(standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.USAGE)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return ExitCode.USAGE
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return ExitCode.INTERRUPTED
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        return ExitCode.INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - every error is one line; --debug adds the traceback
        if debug:
            import traceback

            traceback.print_exc()
        line, code = error_line(exc)
        click.echo(f"error: {line}", err=True)
        return code
    return ExitCode.OK


def main() -> None:
    """Entry point: run the command; user errors print one line and exit 2, a bug exits
    ``ExitCode.INTERNAL`` with a one-line message.

    ``--debug`` (anywhere on the command line) or ``OLOPROOF_DEBUG=1`` adds the traceback.
    """
    import os

    debug = "--debug" in sys.argv or os.environ.get("OLOPROOF_DEBUG") == "1"
    if "--debug" in sys.argv:
        sys.argv.remove("--debug")
    _on_interrupt()
    import gc

    # A run holds every case's records until it stores them; at the default threshold (700) the
    # collector traverses them all again and again: a sixth of the CPU of 100,000 cases
    # (benchmarks/targets.py). This process is ours: collect less often.
    gc.set_threshold(50_000, 10, 10)
    code = _dispatch(debug)
    if code == ExitCode.INTERRUPTED:
        # calls still in flight in worker threads (a system, a judge) are abandoned: exiting
        # normally would wait for each of them
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    # The command is done: what is garbage now is collected once (a store's connection, closed
    # and checkpointed), and what is left is frozen, so the interpreter's exit frees it without
    # traversing it all again (a tenth of the CPU of a 1,000-case run; docs/http.md)
    gc.collect()
    gc.freeze()
    sys.exit(code)
