"""oloproof.yaml -> Suite: the system, cases, evaluators, slices, policy and settings."""

from __future__ import annotations

import difflib
import inspect
import sys
from pathlib import Path
from typing import Any

from attrs import field, frozen, has
from attrs import fields as attrs_fields

from .config import CONVERTER, Document, load_cases, structure, yaml_path
from .errors import ConfigError
from .identity import canonical, digest
from .gate import Policy, load_policy
from .model import Case, Evaluator, Slice, StageCache, System, SystemContext
from .plugins import Plugins
from .fingerprint import is_installed, reach_fingerprint
from .recording import source_fingerprint
from .relevance import UNITS, one_of

SYSTEM_KEYS = ("name", "version", "cache")
EXECUTIONS = ("auto", "reuse", "refresh")  # system.cache: when cached executions are reused


@frozen(kw_only=True)
class Skeleton:
    """The top level of oloproof.yaml; plugin blocks are structured in a second pass."""

    system: dict
    cases: str = "cases.jsonl"
    evaluators: list[dict] = field(factory=list)
    slices: list[str] = field(factory=list)
    min_slice_support: int = 10
    # doc or chunk; None: the one the evaluators name, else doc
    relevance_unit: str | None = field(default=None, validator=lambda i, a, v: v is None or one_of(UNITS)(i, a, v))
    policy: Any = None
    concurrency: int = 8
    store: dict = field(factory=lambda: {"type": "local"})
    disable_plugins: list[str] = field(factory=list)


@frozen(kw_only=True)
class EvaluatorSpec:
    """One evaluator of the suite and the identity its judgments are cached under."""

    type: str
    evaluator: Evaluator
    identity: dict
    where: str


@frozen(kw_only=True)
class Suite:
    config_path: Path
    project_dir: Path
    system: System
    system_kind: str
    cases: tuple[Case, ...]
    evaluators: tuple[EvaluatorSpec, ...]
    metrics: dict  # criterion -> Metric
    slices: tuple[Slice, ...]
    min_slice_support: int
    policy: Policy | None
    concurrency: int
    relevance_unit: str = "doc"
    store_type: str
    store_options: Any
    # auto: reuse cached executions of a system whose code is fingerprinted, re-contact an opaque
    # one (an HTTP service); reuse: reuse them for any system; refresh: re-execute every case
    executions: str = "auto"


def _options(doc: Document, entry: Any, data: dict, path: tuple, what: str) -> Any:
    if entry.options is None:
        if data:
            key = sorted(data)[0]
            raise ConfigError(f"unknown key {key!r}", where=doc.where(path + (key,)),
                              fix=f"remove it; {what} takes no options")
        return None
    return structure(doc, data, entry.options, path, what=what)


def unstructure(options: Any) -> Any:
    return CONVERTER.unstructure(options) if options is not None else None


def evaluator_code(cls: type) -> list[str]:
    """An evaluator's code: its module's source, and what its class can reach from the folder its
    package lives in (a helper module of a plugin being developed, not only a released version).
    An installed package is covered by its distribution's version, which the identity records."""
    import os

    module = sys.modules.get(cls.__module__)
    filename = getattr(module, "__file__", None)
    if filename is None:
        return [source_fingerprint(cls)]
    top = sys.modules.get(cls.__module__.split(".")[0])
    package_file = getattr(top, "__file__", None) or filename
    if is_installed(package_file):
        return [source_fingerprint(cls)]
    root = os.path.dirname(os.path.dirname(package_file)) if package_file.endswith("__init__.py") else (
        os.path.dirname(package_file))
    return [source_fingerprint(cls), digest(reach_fingerprint([cls], [root], cls=cls))]


def load_skeleton(config_path: Path) -> tuple[Document, Skeleton]:
    doc = Document.load(config_path)
    if not isinstance(doc.data, dict):
        raise ConfigError("expected a mapping of settings", where=doc.where(), fix="see docs/config.md")
    return doc, structure(doc, doc.data, Skeleton, what="oloproof.yaml")


def load_suite(config_path: Path, plugins: Plugins, doc: Document | None = None,
               skeleton: Skeleton | None = None, store: Any = None, use_cache: bool = True,
               executions: str | None = None) -> Suite:
    """Load and check everything a run needs, before anything runs or is stored.

    :param executions: ``reuse`` or ``refresh`` from the command line, over ``system.cache``.
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
        sys.path.append(str(project_dir))  # after the installed packages: a project ulid.py shadows nothing

    system, kind = _load_system(doc, skeleton.system, plugins, project_dir, store,
                                use_cache and executions != "refresh")
    cases = tuple(load_cases(project_dir / skeleton.cases))

    unit = relevance_unit(doc, skeleton)
    evaluators, metrics = [], {}
    for i, raw in enumerate(skeleton.evaluators):
        path = ("evaluators", i)
        if not isinstance(raw, dict) or "type" not in raw:
            raise ConfigError("expected a mapping with `type:`", where=doc.where(path),
                              fix="write {type: contains, criterion: answer_correct, ...}")
        data = dict(raw)
        name = data.pop("type")
        entry = plugins.evaluators.get(name, where=doc.where(path + ("type",)))
        if "relevance_unit" not in data and _takes_unit(entry.options):
            data["relevance_unit"] = unit  # the suite's one unit, for every evaluator that counts units
        options = _options(doc, entry, data, path, f"evaluator {name!r} from {entry.distribution}")
        evaluator = entry.factory(options)
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
        extra = getattr(evaluator, "identity", None)  # e.g. a judge's prompt version, provider and model
        if extra:
            identity["extra"] = dict(extra)
        evaluators.append(EvaluatorSpec(type=name, evaluator=evaluator, identity=identity, where=doc.where(path)))

    for spec in evaluators:  # a case the evaluator cannot read stops here, before anything runs
        exclude = getattr(spec.evaluator, "exclude", None)
        if exclude is not None:
            for case in cases:
                exclude(case)

    slices = []
    for i, spec in enumerate(skeleton.slices):
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

    policy = None
    if skeleton.policy is not None:
        policy = load_policy(doc, skeleton.policy, project_dir, ("policy",))
        policy.check_metrics(metrics)

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
                 executions=executions, relevance_unit=unit)


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


def _load_system(doc: Document, block: dict, plugins: Plugins, project_dir: Path,
                 store: Any = None, use_cache: bool = True) -> tuple[System, str]:
    path = ("system",)
    kinds = [k for k in block if k not in SYSTEM_KEYS]
    if len(kinds) != 1:
        known = ", ".join(plugins.systems.names())
        problem = "no system kind" if not kinds else f"more than one system kind ({', '.join(kinds)})"
        for key in kinds:
            close = difflib.get_close_matches(key, SYSTEM_KEYS, n=1)
            if close and key not in plugins.systems:
                raise ConfigError(f"unknown key {key!r}", where=doc.where(path + (key,)), fix=f"rename it to {close[0]!r}")
        raise ConfigError(problem, where=doc.where(path), fix=f"give exactly one of: {known}")
    kind = kinds[0]
    entry = plugins.systems.get(kind, where=doc.where(path + (kind,)))
    for key in SYSTEM_KEYS:
        if key in block and not isinstance(block[key], str):
            raise ConfigError(f"expected a string, got {block[key]!r}", where=doc.where(path + (key,)),
                              fix="quote the value")
    value = block[kind]
    shorthand = entry.extra.get("shorthand")
    if not isinstance(value, dict) and shorthand:
        value = {shorthand: value}
    if not isinstance(value, dict):
        raise ConfigError(f"expected a mapping of {kind} settings", where=doc.where(path + (kind,)))
    options = _options(doc, entry, value, path + (kind,), f"system kind {kind!r}")
    context = SystemContext(name=block.get("name", ""), version=block.get("version", ""),
                            project_dir=project_dir, cache=StageCache(store, read=use_cache) if store is not None else None)
    try:
        return entry.factory(options, context), kind
    except ConfigError as exc:
        if exc.where:
            raise
        raise ConfigError(exc.problem, where=doc.where(path + (kind,)), fix=exc.fix) from None


__all__ = ["Suite", "load_suite", "canonical", "digest", "yaml_path"]
