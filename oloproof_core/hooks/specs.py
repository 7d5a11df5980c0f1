"""Hook specifications: signatures and docstrings, no logic.

Three kinds of hook: **register** hooks fill a :class:`~oloproof_core.registry.Registry`,
**resolve** hooks (``firstresult``) answer "who handles this?", and **notify** hooks observe a run.
Hooks are called with keyword arguments; an implementation may accept any subset of them.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("oloproof")
hookimpl = pluggy.HookimplMarker("oloproof")


@hookspec
def oloproof_register_systems(registry: Any) -> None:
    """Add system kinds that a suite selects with a key under ``system:`` (``callable:``, ``http:``).

    :param registry: call ``registry.add(name, factory, options=Options, shorthand="field")``
        once per kind. The runner calls ``factory(options, context)`` with a
        :class:`~oloproof_core.model.SystemContext` and expects a
        :class:`~oloproof_core.model.System`. ``shorthand`` names the option a plain YAML
        string fills (``callable: app:run``).

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_register_evaluators(registry: Any) -> None:
    """Add evaluators that a suite selects with ``type: <name>``.

    :param registry: call ``registry.add(name, factory, options=Options)`` once per evaluator.
        The suite's keys beside ``type`` structure into ``Options``; ``factory(options)``
        returns an :class:`~oloproof_core.model.Evaluator` with ``criterion`` and ``metric``.

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_register_metrics(registry: Any) -> None:
    """Add metrics: how the judgments of one criterion become an estimate with an interval.

    :param registry: call ``registry.add(name, factory)``; ``factory()`` returns a
        :class:`~oloproof_core.model.Metric`. Evaluators name the metric they need
        (``proportion`` for pass/fail, ``mean`` for bounded scores).

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_register_interventions(registry: Any) -> None:
    """Add interventions that ``oloproof diagnose --intervention NAME`` applies to failed cases.

    :param registry: call ``registry.add(name, factory, options=Options)``. The command line's
        ``--top-k``, ``--token-budget``, ``--reranker`` and ``--option KEY=VALUE`` structure into ``Options``, and
        ``factory(options)`` returns an intervention with:

        - ``label`` (``"top-k 4"``), ``control_label`` (``"control"`` or ``"replay control"``);
        - ``labels_by_recovery``: True when its recoveries label the failures (gold-context),
          False when it confirms the labels of the run's latest gold-context diagnosis;
        - ``supports(system) -> bool``: False for a system it cannot re-execute (a black box),
          whose cases are then UNRESOLVED with ``intervention_unsupported``;
        - ``check(system)``: raise ConfigError for options that cannot apply (exit 2); it runs
          before any case is re-executed;
        - ``confirms`` (optional): the label its recoveries confirm (``RANKED_OUT`` for top-k
          and reranker, ``CONTEXT_ASSEMBLY_LOSS`` for token-budget), printed as ``Confirmed under
          <label>: x of y <LABEL> cases also recovered``, followed by where the re-execution left
          the relevant evidence of those that did not recover (``dropped for token_budget in the
          replay``), read from the artifacts it recorded;
        - ``tests`` and ``usage`` (optional, on the class): the candidate experiment it tests
          (``"a larger token budget"``) and its options on the command line
          (``"--token-budget N"``); a gold-context diagnosis that suggests that experiment, or
          implicates the label it ``confirms``, ends with the command that runs it;
        - ``apply(system, case, record, recorder)`` and ``control(system, case, record, recorder)``:
          re-execute one case under the intervention, and unchanged; ``record`` is the parent
          run's record of the case, ``recorder`` takes the artifacts. A staged system offers
          ``generate_with(case, context, recorder)``, ``rerun(case, recorder)`` and
          ``replay(case, record, recorder, top_k=None, rerank=None, token_budget=None)`` (the
          recorded retrieval, reordered by ``rerank(input, candidates)``, assembled with that
          top_k and budget, the system's own where None) for this.

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_register_slices(registry: Any) -> None:
    """Add slices that group cases in the exploratory slice table (``slices: [metadata.topic]``).

    :param registry: call ``registry.add(name, factory)``. A suite entry ``name.argument``
        calls ``factory(argument)`` (``metadata.topic`` -> ``factory("topic")``); a bare ``name``
        calls ``factory(None)``. The result is a :class:`~oloproof_core.model.Slice`; its
        optional ``check(system)`` raises ConfigError when the slice cannot apply to that system.
        A ``check`` that takes a ``relevance_unit`` parameter is also given the suite's unit
        (``doc`` or ``chunk``), so a slice that places relevant passages (``observe(case,
        execution, relevance_unit, top_k)``) counts them as the retrieval evaluators do.

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_register_stores(registry: Any) -> None:
    """Add stores that keep runs, caches and diagnoses (``store: {type: <name>}``).

    :param registry: call ``registry.add(name, factory, options=Options)``, optionally with
        ``url_schemes=("scheme",)`` and ``shorthand="option"`` so ``--store scheme://...`` and
        ``OLOPROOF_STORE`` select it; ``factory(options, project_dir)`` returns a store. The
        contract (runs, execution, judgment and stage caches, content-addressed objects) is the
        test suite ``oloproof.testing.StoreContract``, which the store's own tests subclass.

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_register_executors(registry: Any) -> None:
    """Add executors: where and how a run's cases execute (``executor: {type: <name>, ...}`` in
    the suite, ``oloproof run --executor <name>``). ``local`` (threads or an event loop on this
    machine) is the default.

    :param registry: call ``registry.add(name, factory, options=Options)``; ``factory(options)``
        returns an object with ``run(work, cases, done)``: call ``work.execute(case)`` (or ``await
        work.aexecute(case)`` when ``work.is_async``) for every case, at most ``work.concurrency``
        at a time here, and ``done(index, execution)`` in this process as each finishes, in any
        order. A run calls ``run`` once per batch of its cases (runs stream), then, if the executor
        has it, ``close(work)`` once: release the workers there (and ``await work.aclose()`` for an
        asynchronous system). An executor that runs cases elsewhere builds the same work
        there with ``work.recipe.build(project_dir, stage_cache)`` and sends executions back as
        ``execution.to_data()`` (``Execution.from_data`` on this side); only this process writes
        the store. Ctrl-C arrives here as KeyboardInterrupt: stop the remote work and re-raise.

    .. versionadded:: 0.2
    """


@hookspec
def oloproof_register_artifacts(registry: Any) -> None:
    """Add typed, versioned artifact types that systems record (``retrieval/v1``).

    :param registry: call ``registry.add("name/vN", factory)``; ``factory()`` returns an object
        with ``to_data(value) -> dict`` (validates a recorded value, raising ArtifactError) and
        ``from_data(data) -> value`` (structures plain data, e.g. from an HTTP response).

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_run_started(run: Any) -> None:
    """Called once before the first case of a run executes. ``run`` is the run's header record.

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_case_finished(run: Any, case: Any, execution: Any, judgments: Any) -> None:
    """Called in case order for each case of a run, as each batch of cases has been executed and
    judged.

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_run_finished(run: Any, summary: Any) -> None:
    """Called once after a run is stored, with its summary record (metrics, gate, caches).

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_register_providers(registry: Any) -> None:
    """Add LLM providers that judges select with ``provider: <name>`` (``openai``, ``anthropic``).

    :param registry: call ``registry.add(name, factory, options=Options)`` once per provider. A
        judge's ``model`` and ``provider_options`` structure into ``Options``, and
        ``factory(options)`` returns a provider with ``name``, ``model`` and
        ``complete(prompt, *, system=None) -> reply``, where ``reply.text`` is the model's text
        and ``reply.usage`` a dict of ``input_tokens``, ``output_tokens`` and, when the options
        give prices, ``cost``. ``complete`` is called from several threads at once and raises
        EvaluationError (``provider_error: 429``) when a request still fails after its retries.
        The factory raises ConfigError when the credentials are missing, so a run stops before
        any case is judged. Judges reach a provider through ``oloproof.open_provider``.

    .. versionadded:: 0.1
    """


@hookspec
def oloproof_register_generators(registry: Any) -> None:
    """Add case generators that ``oloproof generate --generator NAME`` uses to write cases from a
    corpus (``llm_generator`` is the builtin).

    :param registry: call ``registry.add(name, factory, options=Options)``. The command line's
        ``--provider``, ``--model``, ``--provider-option KEY=VALUE`` and ``--option KEY=VALUE``
        structure into ``Options``; ``factory(options)`` returns a generator with:

        - ``identity``: a dict (prompt versions and texts, provider, model, ...), recorded in every
          case's ``metadata.synthetic`` and part of the key under which its work is resumed;
        - ``kinds``: the question kinds it writes (``factoid``, ``two_passage``, ``paraphrased``,
          ``unanswerable``, or its own);
        - ``estimate(request) -> dict``: ``calls``, ``input_tokens``, ``output_tokens`` and
          ``cost`` (None when unpriced) of one request, before anything is asked;
        - ``generate(request) -> dict``: ``question``, ``answer`` and ``usage`` for a request
          (``kind``, ``passages``: ``[{doc_id, chunk_id, text}]``, ``seed``); raise
          EvaluationError when the reply cannot be used (the request is then dropped and counted);
        - ``check(request, item) -> dict`` (optional): ``supported`` (bool), ``rationale`` and
          ``usage``: whether the passages support the answer; an item not supported is dropped.

    .. versionadded:: 0.3
    """


@hookspec
def oloproof_register_commands(cli: Any) -> None:
    """Add commands to the ``oloproof`` command line.

    :param cli: the ``oloproof`` click group: call ``cli.add_command(command)`` with a
        ``click.Command`` (or a ``click.Group`` of subcommands). The builtin commands are added
        this way too, so a plugin's command takes the same options (``--config``, ``--store``:
        ``oloproof.cli_options``) and reaches the same project (``oloproof.Project``). A command
        whose name a builtin already has replaces nothing: the builtin is kept. The hook is called
        when the command line needs the list (``oloproof --help``) or a name no builtin has, so
        a plugin's module should import what is heavy inside its command, not at its top.

    .. versionadded:: 0.2
    """


@hookspec
def oloproof_register_reporters(registry: Any) -> None:
    """Add output formats: files a run or a comparison writes beside its terminal report.

    :param registry: call ``registry.add(name, factory)`` once per format; ``factory(None)``
        returns a reporter with ``write(view, target, *, records=None, context=None)``. ``view``
        is the results document ``--json`` writes (docs/gates-in-ci.md: ``kind`` ``run`` or
        ``comparison``, ``gate``, ``metrics``, ``decisions``...), a plain dict; ``target`` the
        text after ``--report NAME=`` (a file name, usually); ``records`` an iterable of the run's
        case records (the candidate's, for a comparison); ``context`` has ``store``, ``plugins``
        and ``subject`` (the run id or ``sha256:`` object id reported). ``oloproof run --report
        NAME=TARGET`` and ``oloproof compare --report NAME=TARGET`` call it; the builtin
        ``junit``, ``json``, ``markdown`` and ``html`` reporters are registered the same way
        (``--junit FILE`` is ``--report junit=FILE``). A reporter raises OSError or
        OloproofError when it cannot write; the command prints one line and exits 2.

    .. versionadded:: 0.2
    """


@hookspec
def oloproof_register_trace_receivers(registry: Any) -> None:
    """Add trace receivers that a suite selects under ``traces:`` (``traces: otlp``, or
    ``system.http.traces``): what takes the spans a traced system exports during a run.

    :param registry: call ``registry.add(name, factory, options=Options)``. The suite's
        ``traces: {NAME: {...}}`` structures into ``Options``, and ``factory(options, mappings)``
        (``mappings``: a dict of name to span mapping object, ``oloproof_register_span_mappings``)
        returns a receiver, started before the system is built (so a callable system's exporter
        sees ``OTEL_EXPORTER_OTLP_ENDPOINT``), with ``wrap(system) -> system``: the system whose
        every case carries a fresh W3C ``traceparent`` (``Recorder.traceparent``) and records what
        the mappings make of the spans filed under that case's trace id, waiting a bounded grace
        period for them. The wrapped system's ``trace_figures() -> dict`` is what the run header
        keeps (``endpoint``, spans filed and ignored); ``spread(concurrency) -> int``, when it has
        one, lets more cases wait for their spans than the system is called for at once. A case
        whose spans never came sets ``recorder.unrecorded = "no_trace_spans"``: its artifact
        criteria are missing with that reason. ``close()`` stops the receiver. An optional
        ``read_file=`` given to ``registry.add`` (``read_file(text) -> spans``) reads exported
        spans from a file, for ``oloproof cases from-traces``.

    .. versionadded:: 0.3
    """


@hookspec
def oloproof_register_span_mappings(registry: Any) -> None:
    """Add span mappings: how the spans of one case's trace become Oloproof artifacts
    (``openinference``, ``genai``); a suite names them with ``traces: {mappings: [...]}``.

    :param registry: call ``registry.add(name, factory)``; ``factory()`` returns an object with
        ``produces`` (the artifact types it may record, ``("retrieval/v1", "context/v1")``) and
        ``map(spans) -> list[(artifact_type, value)]``. ``spans`` are plain dicts, in the order
        received: ``trace_id`` and ``span_id`` (hex), ``parent_span_id`` (hex or None), ``name``,
        ``kind``, ``start_ns``, ``end_ns``, ``attributes`` (a dict of plain values; arrays as
        lists) and ``events`` (``[{name, time_ns, attributes}]``). Values are validated by the
        artifact types, as a system's own recordings are. A mapping that finds nothing returns
        an empty list; the receiver then names the spans it saw.

    .. versionadded:: 0.3
    """
