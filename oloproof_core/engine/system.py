"""The suite file's top level and its system: read before anything else is built.

``load_skeleton`` reads oloproof.yaml's top level; ``load_system`` builds the system its plugin
makes. An executor's worker calls both (``work.WorkRecipe.build``) to rebuild the same system.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from attrs import field, frozen

from oloproof_core.config.documents import CONVERTER, Document, structure
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import System, SystemContext
from oloproof_core.model.retrieval import UNITS, one_of
from oloproof_core.hooks.manager import Plugins

SYSTEM_KEYS = ("name", "version", "cache")


EXECUTIONS = ("auto", "reuse", "refresh")  # system.cache: when cached executions are reused


@frozen(kw_only=True)
class Skeleton:
    """The top level of oloproof.yaml; plugin blocks are structured in a second pass."""

    system: dict
    cases: Any = "cases.jsonl"  # a file, {path: FILE, format: csv}, or {hf: NAME, split: test}; cases.py
    evaluators: list[dict] = field(factory=list)
    # a slice name, or {slice: NAME, metrics: [criterion, ...]} to show only those criteria
    slices: list[str | dict] = field(factory=list)
    min_slice_support: int = 10
    # doc or chunk; None: the one the evaluators name, else doc
    relevance_unit: str | None = field(default=None, validator=lambda i, a, v: v is None or one_of(UNITS)(i, a, v))
    policy: Any = None
    # {evidence_min_grade: G}: only relevant units of grade >= G count as evidence in diagnosis
    relevance: dict = field(factory=dict)
    concurrency: int = 8
    store: dict = field(factory=lambda: {"type": "local"})
    executor: Any = None  # a name (local, ray) or {type: ray, address: ...}; None: local
    disable_plugins: list[str] = field(factory=list)
    trials: int = 1  # executions of every case; their verdicts are summarised per case (units.py)
    cluster: str | None = None  # a case field path; cases sharing its value are one unit of analysis
    traces: Any = None  # a receiver's name (otlp) or {otlp: {...}, mappings: [...]}; docs/traces.md
    max_cluster_size: int = 10  # a cluster of more cases than this is reported; declared: case-weighted
    cluster_estimand: str | None = None  # cases or cluster-means; None: cases when max_cluster_size is set


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


def load_skeleton(config_path: Path) -> tuple[Document, Skeleton]:
    doc = Document.load(config_path)
    if not isinstance(doc.data, dict):
        raise ConfigError("expected a mapping of settings", where=doc.where(), fix="see docs/config.md")
    return doc, structure(doc, doc.data, Skeleton, what="oloproof.yaml")


def load_system(doc: Document, block: dict, plugins: Plugins, project_dir: Path,
                stage_cache: Any = None, traces: Any = None) -> tuple[System, str]:
    """The suite's system, built by its plugin; ``stage_cache`` is what its own stage caches use.
    With ``traces`` (the top-level ``traces:`` block, or ``traces:`` inside the system kind's
    block) the trace receiver starts first and wraps the system (docs/traces.md)."""
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
    traces_path: tuple = ("traces",)
    if "traces" in value:
        value = dict(value)
        traces, traces_path = value.pop("traces"), path + (kind, "traces")
    receiver = None if traces is None else load_traces(doc, traces, plugins, traces_path)
    options = _options(doc, entry, value, path + (kind,), f"system kind {kind!r}")
    context = SystemContext(name=block.get("name", ""), version=block.get("version", ""),
                            project_dir=project_dir, cache=stage_cache)
    try:
        system = entry.factory(options, context)
    except ConfigError as exc:
        if receiver is not None:
            receiver.close()
        if exc.where:
            raise
        raise ConfigError(exc.problem, where=doc.where(path + (kind,)), fix=exc.fix) from None
    return (system if receiver is None else receiver.wrap(system)), kind


def load_traces(doc: Document, block: Any, plugins: Plugins, path: tuple) -> Any:
    """The started trace receiver of ``traces:``: a receiver's name, or a mapping of one receiver's
    options and ``mappings: [NAME, ...]`` (every registered span mapping by default)."""
    if isinstance(block, str):
        block = {block: {}}
    if not isinstance(block, dict):
        raise ConfigError(f"expected a receiver's name or a mapping, got {block!r}", where=doc.where(path),
                          fix="write traces: otlp, or traces: {otlp: {port: 4318}}")
    block = dict(block)
    names = block.pop("mappings", None)
    kinds = list(block)
    if len(kinds) != 1:
        known = ", ".join(plugins.trace_receivers.names()) or "none installed"
        raise ConfigError("expected exactly one trace receiver" if kinds else "no trace receiver",
                          where=doc.where(path), fix=f"give one of: {known} (traces: otlp)")
    kind = kinds[0]
    entry = plugins.trace_receivers.get(kind, where=doc.where(path + (kind,)))
    if names is None:
        names = plugins.span_mappings.names()
    if not isinstance(names, list) or not names:
        raise ConfigError(f"mappings must be a non-empty list of span mappings, got {names!r}",
                          where=doc.where(path + ("mappings",)), fix="write mappings: [openinference, genai]")
    mappings = {name: plugins.span_mappings.get(name, where=doc.where(path + ("mappings",))).factory() for name in names}
    options = _options(doc, entry, block[kind] or {}, path + (kind,), f"trace receiver {kind!r}")
    try:
        return entry.factory(options, mappings)
    except ConfigError as exc:
        raise ConfigError(exc.problem, where=exc.where or doc.where(path + (kind,)), fix=exc.fix) from None
