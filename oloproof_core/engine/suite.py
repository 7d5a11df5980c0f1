"""oloproof.yaml -> Suite: the system, cases, evaluators, slices, policy and settings."""

from __future__ import annotations

import difflib
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import field, frozen, has
from attrs import fields as attrs_fields

from oloproof_core.config.cases import CaseStream, load_cases
from oloproof_core.config.turns import is_turn
from oloproof_core.engine.conversations import CLUSTER, with_scope
from oloproof_core.config.documents import Document, structure, yaml_path
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.identity import canonical, digest
from oloproof_core.model.records import Case, Evaluator, Slice, StageCache, System, caches_judgments, select
from oloproof_core.hooks.manager import Plugins
from oloproof_core.engine.fingerprint import plugin_code
from oloproof_core.engine.providers import suite_providers
from oloproof_core.model.retrieval import UNITS
from oloproof_core.statistics.units import ESTIMANDS, PASS_ALL, Design, all_turns_name, pass_all_name
from oloproof_core.engine.system import EXECUTIONS, Skeleton, _options, load_skeleton, load_system, unstructure

if TYPE_CHECKING:  # the policy's classes are imported by a suite that has one (load_suite)
    from oloproof_core.decisions.gate import Policy


@frozen(kw_only=True)
class EvaluatorSpec:
    """One evaluator of the suite and the identity its judgments are cached under."""

    type: str
    evaluator: Evaluator
    identity: dict
    where: str
    cached: bool = True  # its judgments go through the judgment cache (``cache:``; judging.judgments_cached)


@frozen(kw_only=True)
class Suite:
    config_path: Path
    project_dir: Path
    system: System
    system_kind: str
    cases: Sequence[Case]  # a tuple, or a CaseStream reading a large JSONL file again for each pass
    evaluators: tuple[EvaluatorSpec, ...]
    metrics: dict  # criterion -> Metric
    slices: tuple[Slice, ...]
    min_slice_support: int
    policy: Policy | None
    concurrency: int
    relevance_unit: str = "doc"
    evidence_min_grade: float | None = None  # relevance.evidence_min_grade; None: every labelled grade above 0
    relevance_judge: str | None = None  # relevance: {source: judge, judge: <criterion>}; None: human labels only
    store_type: str
    store_options: Any
    # auto: reuse cached executions of a system whose code is fingerprinted, re-contact an opaque
    # one (an HTTP service); reuse: reuse them for any system; refresh: re-execute every case
    executions: str = "auto"
    # slice name -> the criteria its rows show (`{slice: ..., metrics: [...]}`); absent: every one
    slice_criteria: dict = field(factory=dict)
    design: Design = Design()  # trials and clusters (units.py); the default summarises every case once
    executor: Any = None  # the executor plugin's object (execution.executor_of)
    executor_name: str = "local"
    recipe: Any = None  # execution.WorkRecipe: how an executor's worker builds the same system
    stage_cache: Any = None  # the system's StageCache (None without a store)


def evaluator_code(cls: type) -> list[str]:
    """An evaluator's code (:func:`~oloproof_core.engine.fingerprint.plugin_code` of its class)."""
    return plugin_code(cls)


def load_suite(config_path: Path, plugins: Plugins, doc: Document | None = None,
               skeleton: Skeleton | None = None, store: Any = None, use_cache: bool = True,
               executions: str | None = None, trials: int | None = None, executor: str | None = None) -> Suite:
    """Load and check everything a run needs, before anything runs or is stored.

    :param executions: ``reuse`` or ``refresh`` from the command line, over ``system.cache``.
    :param trials: ``--trials N`` from the command line, over ``trials:``.
    :param executor: ``--executor NAME`` from the command line, over the suite's ``executor:``.
    """
    if doc is None or skeleton is None:
        doc, skeleton = load_skeleton(config_path)
    setting = skeleton.system.get("cache", "auto") if isinstance(skeleton.system, dict) else "auto"
    if setting not in EXECUTIONS:
        raise ConfigError(f"system.cache must be one of {', '.join(EXECUTIONS)}, got {setting!r}",
                          where=doc.where(("system", "cache")),
                          fix="remove it (auto), or write cache: reuse to reuse an HTTP service's executions")
    if not skeleton.evaluators:  # a run would print an empty table and exit 0
        raise ConfigError("the suite has no evaluators, so a run would measure nothing",
                          where=doc.where(("evaluators",) if "evaluators" in doc.data else ()),
                          fix="add at least one under `evaluators:`, e.g. "
                              "`- {type: contains, criterion: answer_correct, field: answer}` (see docs/config.md)")
    executions = executions or setting
    if not use_cache:
        executions = "refresh"
    project_dir = config_path.resolve().parent
    if str(project_dir) not in sys.path:  # `callable: app:run` finds app.py in the project,
        sys.path.append(str(project_dir))  # after the installed packages: a project jinja2.py shadows nothing

    stage_reads = use_cache and executions != "refresh"
    stage_cache = StageCache(store, read=stage_reads) if store is not None else None
    system, kind = load_system(doc, skeleton.system, plugins, project_dir, stage_cache, skeleton.traces)
    executor_name, executor_made = load_executor(doc, skeleton.executor, plugins, executor)
    cases = load_cases(skeleton.cases, project_dir, doc)  # a large JSONL file: checked below, in one pass
    cases = cases if isinstance(cases, CaseStream) else tuple(cases)

    unit = relevance_unit(doc, skeleton)
    evaluators, metrics = [], {}
    for i, raw in enumerate(skeleton.evaluators):
        path = ("evaluators", i)
        if not isinstance(raw, dict) or "type" not in raw:
            raise ConfigError("expected a mapping with `type:`", where=doc.where(path),
                              fix="write {type: contains, criterion: answer_correct, ...}")
        data = dict(raw)
        name, scope = data.pop("type"), data.pop("scope", "turn")  # scope: conversations.py
        cache = data.pop("cache", None)  # whether its judgments are cached; by default the evaluator's own say
        cache = None if cache is None else structure(doc, cache, bool, path + ("cache",), what="cache")
        entry = plugins.evaluators.get(name, where=doc.where(path + ("type",)))
        if "relevance_unit" not in data and _takes_unit(entry.options):
            data["relevance_unit"] = unit  # the suite's one unit, for every evaluator that counts units
        options = _options(doc, entry, data, path, f"evaluator {name!r} from {entry.distribution}")
        try:  # a factory that reads a file beside the suite (a JSON Schema) takes `suite_dir`; a judge's provider is the suite's
            with suite_providers(plugins.providers):
                evaluator = entry.factory(options, **({"suite_dir": project_dir} if _accepts(entry.factory, "suite_dir") else {}))
        except ConfigError as exc:
            if exc.where is not None:
                raise
            raise ConfigError(exc.problem, where=doc.where(path + ((exc.key,) if exc.key else ())), fix=exc.fix) from None
        evaluator = with_scope(evaluator, scope, doc.where(path + ("scope",)))
        criterion = evaluator.criterion
        for artifact in getattr(evaluator, "reads", ()):
            if artifact not in system.records:
                raise ConfigError(f"evaluator {name!r} reads {artifact}, which system {system.name!r} does not record",
                                  where=doc.where(path + ("type",)),
                                  fix=f'declare "{artifact}" in the system\'s records and record it for every case')
        if criterion in metrics:
            raise ConfigError(f"criterion {criterion!r} is defined twice", where=doc.where(path),
                              fix="give each evaluator its own `criterion:` name")
        metric_entry = plugins.metrics.get(evaluator.metric, where=doc.where(path))
        metrics[criterion] = metric_entry.factory()
        # the evaluator's own code is part of its identity, so editing a plugin misses the cache
        identity = {"type": name, "options": unstructure(options),
                    "plugin": [entry.distribution, entry.version], "code": evaluator_code(type(evaluator))}
        if extra := getattr(evaluator, "identity", None):  # e.g. a judge's prompt version, provider and model
            identity["extra"] = dict(extra)
        if scope != "turn":  # judged once per conversation: another criterion than a turn's
            identity["scope"] = scope
        evaluators.append(EvaluatorSpec(type=name, evaluator=evaluator, identity=identity, where=doc.where(path),
                                        cached=caches_judgments(evaluator) if cache is None else cache))

    # a case an evaluator cannot read stops here, before anything runs (one pass over the cases)
    excluders = [x for x in (getattr(spec.evaluator, "exclude", None) for spec in evaluators) if x is not None]

    turns = []  # a conversation's turn seen (conversations.py): the suite is clustered by conversation

    def readable(case: Case) -> None:
        for exclude in excluders:
            exclude(case)
        if not turns and is_turn(case):
            turns.append(case)

    if isinstance(cases, CaseStream):
        cases.check(readable)  # the file's own check, in the same pass
    else:
        for case in cases:
            readable(case)

    slices, slice_criteria = [], {}
    for i, spec in enumerate(skeleton.slices):
        spec, only = slice_spec(doc, spec, i, metrics)
        head, _, argument = spec.partition(".")
        entry = plugins.slices.get(head, where=doc.where(("slices", i)))
        try:
            slice_ = entry.factory(argument or None)
            check = getattr(slice_, "check", None)
            if check is not None:
                check(system, **({"relevance_unit": unit} if _accepts(check, "relevance_unit") else {}))
        except ConfigError as exc:
            raise ConfigError(exc.problem, where=exc.where or doc.where(("slices", i)), fix=exc.fix) from None
        slices.append(slice_)
        if only is not None:
            slice_criteria[slice_.name] = only

    design = load_design(doc, skeleton, cases, trials, conversations=bool(turns))
    if design.trials > 1:  # pass^k of every pass/fail criterion, a criterion a policy may gate on
        for criterion, metric in list(metrics.items()):
            if getattr(metric, "pass_fail", False):
                metrics[pass_all_name(criterion)] = plugins.metrics.get("proportion").factory()
    if turns:  # X (all turns): a conversation passes when every turn did; slices show the turn criteria
        slice_criteria = {s.name: slice_criteria.get(s.name, tuple(metrics)) for s in slices}
        for spec in evaluators:
            criterion, scope = spec.evaluator.criterion, getattr(spec.evaluator, "scope", "turn")
            if getattr(metrics[criterion], "pass_fail", False) and scope == "turn":
                metrics[all_turns_name(criterion)] = plugins.metrics.get("proportion").factory()

    policy = None
    if skeleton.policy is not None:
        from oloproof_core.decisions.gate import load_policy

        policy = load_policy(doc, skeleton.policy, project_dir, ("policy",))
        for rule in policy.rules:
            if rule.metric.endswith("." + PASS_ALL) and rule.metric not in metrics and design.trials == 1:
                raise ConfigError(f"rule {rule.id!r} gates on {rule.metric}, which needs repeated trials",
                                  where=policy.where.get(rule.id),
                                  fix="add `trials: 5` to oloproof.yaml (or run with --trials 5)")
        policy.check_metrics(metrics)
        shares = {s.evaluator.criterion for s in evaluators
                  if getattr(s.evaluator, "judge", False) is True and s.evaluator.metric != "proportion"}
        for rule in policy.rules:  # a judge's gate compares pass/fail verdicts with human labels
            if rule.metric in shares:
                raise ConfigError(f"rule {rule.id!r} gates on {rule.metric}, an LLM judge's share, which no human "
                                  "label can check", where=policy.where.get(rule.id),
                                  fix=f"give the judge of {rule.metric} a threshold (threshold: 1.0) to gate on its "
                                      "pass/fail verdicts")

    store = dict(skeleton.store)
    store_type = store.pop("type", "local")
    store_entry = plugins.stores.get(store_type, where=doc.where(("store", "type")))
    store_options = _options(doc, store_entry, store, ("store",), f"store {store_type!r}")
    if skeleton.min_slice_support < 0:
        raise ConfigError(f"min_slice_support must be at least 0, got {skeleton.min_slice_support}",
                          where=doc.where(("min_slice_support",)), fix="write min_slice_support: 10")
    if skeleton.concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {skeleton.concurrency}",
                          where=doc.where(("concurrency",)), fix="write concurrency: 8")
    return Suite(config_path=config_path, project_dir=project_dir, system=system, system_kind=kind,
                 cases=cases, evaluators=tuple(evaluators), metrics=metrics, slices=tuple(slices),
                 min_slice_support=skeleton.min_slice_support, policy=policy,
                 concurrency=skeleton.concurrency, store_type=store_type, store_options=store_options,
                 executions=executions, relevance_unit=unit, evidence_min_grade=evidence_grade(doc, skeleton),
                 relevance_judge=relevance_judge(doc, skeleton, evaluators),
                 slice_criteria=slice_criteria, design=design,
                 executor=executor_made, executor_name=executor_name,
                 recipe=_recipe(config_path, project_dir, plugins, stage_reads), stage_cache=stage_cache)


def evidence_grade(doc: Document, skeleton: Skeleton) -> float | None:
    """``relevance.evidence_min_grade``: the lowest grade of a relevant unit that diagnosis counts as
    evidence (None, the default: every labelled unit of a grade above 0)."""
    relevance = skeleton.relevance or {}
    for key in relevance:
        if key not in ("evidence_min_grade", "source", "judge"):
            raise ConfigError(f"unknown key {key!r}", where=doc.where(("relevance", key)),
                              fix="remove it; relevance takes evidence_min_grade, source and judge")
    grade = relevance.get("evidence_min_grade")
    if grade is not None and (isinstance(grade, bool) or not isinstance(grade, (int, float)) or grade <= 0):
        raise ConfigError(f"evidence_min_grade must be a number above 0, got {grade!r}",
                          where=doc.where(("relevance", "evidence_min_grade")),
                          fix="write evidence_min_grade: 2 to count only passages labelled grade 2 or more")
    return None if grade is None else float(grade)


def relevance_judge(doc: Document, skeleton: Skeleton, evaluators: list) -> str | None:
    """``relevance: {source: judge, judge: <criterion>}``: the criterion of the relevance judge whose
    labels stand in for ``expected.relevant`` in cases without human labels; None (``source:
    labels``, the default) for human labels only."""
    relevance = skeleton.relevance or {}
    source = relevance.get("source", "labels")
    if source not in ("labels", "judge"):
        raise ConfigError(f"relevance.source must be labels or judge, got {source!r}",
                          where=doc.where(("relevance", "source")), fix="write source: judge, or remove it")
    judges = [spec.evaluator.criterion for spec in evaluators if getattr(spec.evaluator, "relevance_judge", False)]
    if source == "labels":
        if "judge" in relevance:
            raise ConfigError("relevance.judge is only read with source: judge", where=doc.where(("relevance", "judge")),
                              fix="write source: judge, or remove judge")
        return None
    name = relevance.get("judge", judges[0] if len(judges) == 1 else None)
    if name not in judges:
        raise ConfigError(f"relevance.judge must name the criterion of a relevance_judge evaluator of the suite, "
                          f"got {name!r}", where=doc.where(("relevance", "judge" if "judge" in relevance else "source")),
                          fix=f"write judge: {judges[0]}" if judges else
                          "add `- {type: relevance_judge, provider: ..., model: ...}` under evaluators")
    return name


def slice_spec(doc: Document, spec: Any, i: int, criteria: dict) -> tuple[str, tuple[str, ...] | None]:
    """A ``slices:`` entry as (slice, the criteria its rows show, or None for every criterion):
    ``metadata.topic``, or ``{slice: relevant_position, metrics: [answer_correct]}``."""
    if isinstance(spec, str):
        return spec, None
    where = ("slices", i)
    fix = "write {slice: relevant_position, metrics: [answer_correct]}, or the slice's name alone"
    if not isinstance(spec, dict):
        raise ConfigError(f"expected a slice name or {{slice, metrics}}, got {spec!r}", where=doc.where(where), fix=fix)
    for key in spec:
        if key not in ("slice", "metrics"):
            close = difflib.get_close_matches(str(key), ("slice", "metrics"), n=1)
            raise ConfigError(f"unknown key {key!r}", where=doc.where(where + (key,)),
                              fix=f"did you mean {close[0]!r}?" if close else fix)
    name, only = spec.get("slice"), spec.get("metrics")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"slice must be a slice's name, got {name!r}", where=doc.where(where), fix=fix)
    if not isinstance(only, list) or not only:
        raise ConfigError(f"metrics must be a non-empty list of criteria, got {only!r}",
                          where=doc.where(where + (("metrics",) if "metrics" in spec else ())), fix=fix)
    for j, criterion in enumerate(only):
        if criterion not in criteria:
            close = difflib.get_close_matches(str(criterion), list(criteria), n=1)
            raise ConfigError(f"no criterion {criterion!r} in this suite", where=doc.where(where + ("metrics", j)),
                              fix=f"did you mean {close[0]!r}?" if close else f"use one of: {', '.join(criteria)}")
    return name, tuple(dict.fromkeys(only))


def load_design(doc: Document, skeleton: Skeleton, cases: tuple[Case, ...], trials: int | None,
                conversations: bool = False) -> Design:
    """``trials:`` (or ``--trials``), ``cluster:``, ``max_cluster_size:`` and ``cluster_estimand:``,
    checked. The estimand is the case-weighted mean when the suite declares ``max_cluster_size``,
    else the mean of cluster means (as runs made before it was recorded). With ``conversations``
    the cluster is the conversation, and the estimand by default case-weighted (each turn once)."""
    count = skeleton.trials if trials is None else trials
    if count < 1:
        where = doc.where(("trials",)) if trials is None else "--trials"
        raise ConfigError(f"trials must be at least 1, got {count}", where=where,
                          fix="write trials: 5 (each case runs five times), or leave it out for one")
    if skeleton.max_cluster_size < 1:
        raise ConfigError(f"max_cluster_size must be at least 1, got {skeleton.max_cluster_size}",
                          where=doc.where(("max_cluster_size",)), fix="write max_cluster_size: 10")
    path = skeleton.cluster
    if conversations and path is not None:
        raise ConfigError(f"the cases hold conversations, which are the clusters, so cluster: {path} cannot be",
                          where=doc.where(("cluster",)), fix="remove cluster: (every turn of a conversation is one unit)")
    if conversations:
        path = CLUSTER
    elif path is not None:
        if not path or not all(path.split(".")):
            raise ConfigError(f"cluster must be a case field path, got {path!r}", where=doc.where(("cluster",)),
                              fix="write cluster: metadata.source")
        if cases and all(select(case.to_data(), path) is None for case in cases):
            raise ConfigError(f"no case has a value at {path}, so no two cases would share a cluster",
                              where=doc.where(("cluster",)),
                              fix="name a field the cases have (metadata.source, input.document), or remove cluster:")
    estimand = skeleton.cluster_estimand
    if estimand is None:
        estimand = "cases" if conversations or isinstance(doc.data, dict) and "max_cluster_size" in doc.data \
            else "cluster-means"
    elif estimand not in ESTIMANDS:
        raise ConfigError(f"cluster_estimand must be one of {', '.join(ESTIMANDS)}, got {estimand!r}",
                          where=doc.where(("cluster_estimand",)),
                          fix="write cluster_estimand: cases (each case counts once) or cluster-means")
    elif path is None:
        raise ConfigError("cluster_estimand says how clusters weigh, and this suite sets no cluster",
                          where=doc.where(("cluster_estimand",)), fix="add cluster: metadata.source, or remove it")
    return Design(trials=count, cluster=path, max_cluster_size=skeleton.max_cluster_size, estimand=estimand)


def _recipe(config_path: Path, project_dir: Path, plugins: Plugins, stage_reads: bool) -> Any:
    from oloproof_core.engine.work import WorkRecipe

    disabled = tuple(sorted(name for name, plugin in plugins.pm.list_name_plugin() if plugin is None))
    return WorkRecipe(project_dir=str(project_dir), config_name=str(config_path.resolve().relative_to(project_dir)),
                      disabled=disabled, stage_reads=stage_reads)


def load_executor(doc: Document, block: Any, plugins: Plugins, override: str | None = None) -> tuple[str, Any]:
    """The suite's ``executor:`` (a name, or a mapping with ``type:`` and the executor's options):
    its name and the object its plugin made; ``--executor NAME`` replaces its type (and keeps its options when it names
    the same type). Bad options stop here, before anything runs."""
    path = ("executor",)
    if block is None or isinstance(block, str):
        data, name = {}, block or "local"
    elif isinstance(block, dict) and isinstance(block.get("type", "local"), str):
        data = dict(block)
        name = data.pop("type", "local")
    else:
        raise ConfigError("expected an executor name or a mapping with `type:`", where=doc.where(path),
                          fix="write executor: local, or executor: {type: ray, address: auto}")
    if override is not None and override != name:
        name, data = override, {}
    where = "--executor" if override is not None else doc.where(path + ("type",) if isinstance(block, dict) else path)
    entry = plugins.executors.get(name, where=where)
    options = _options(doc, entry, data, path, f"executor {name!r} from {entry.distribution}")
    try:
        return name, entry.factory(options)
    except ConfigError as exc:
        raise ConfigError(exc.problem, where=doc.where(path), fix=exc.fix) from None


def _takes_unit(options: Any) -> bool:
    return options is not None and has(options) and any(f.name == "relevance_unit" for f in attrs_fields(options))


def _accepts(function: Any, name: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def relevance_unit(doc: Document, skeleton: Skeleton) -> str:
    """The suite's one relevance unit: ``relevance_unit:`` at the top level, else the one every
    evaluator that names a unit agrees on, else ``doc``. Two units in one suite are an error,
    located at the evaluator that departs from the first one named."""
    named = [(("relevance_unit",), skeleton.relevance_unit)] if skeleton.relevance_unit is not None else []
    named += [(("evaluators", i, "relevance_unit"), raw["relevance_unit"])
              for i, raw in enumerate(skeleton.evaluators)
              if isinstance(raw, dict) and raw.get("relevance_unit") in UNITS]
    if not named:
        return "doc"
    first_at, unit = named[0]
    for at, other in named[1:]:
        if other != unit:
            raise ConfigError(f"relevance_unit {other} here, but {unit} at {doc.where(first_at).split(': ')[0]}; "
                              "a suite counts relevance in one unit (its evaluators, the relevant_position slice "
                              "and diagnose)",
                              where=doc.where(at),
                              fix=f"set `relevance_unit: {unit}` (or {other}) once at the top of the suite and "
                                  "remove it from the evaluators")
    return unit


__all__ = ["Suite", "load_suite", "canonical", "digest", "yaml_path"]
