"""Production traces as cases: ``oloproof cases from-traces FILE`` (docs/traces.md).

The spans of a file (read by a trace receiver's ``read_file``: OTLP/JSON as the collector's file
exporter writes it) are redacted, grouped by trace, filtered and sampled, and each trace with a
question becomes a case: the question as its input, the recorded answer as
``metadata.production_answer`` and the last retrieval the span mappings found as
``metadata.recorded_retrieval``, which a staged system replays instead of calling its retriever.
"""

from __future__ import annotations

import fnmatch
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from oloproof_core.model.errors import ConfigError

REDACTED = "[redacted]"


def redact(spans: Iterable[dict], patterns: Sequence[str]) -> list[dict]:
    """Every span with the attributes (of the span and its events) whose name matches one of the
    glob ``patterns`` (``user.*``, ``*.email``) replaced by ``[redacted]``, before anything else."""

    def clean(attributes: Mapping[str, Any]) -> dict:
        return {k: REDACTED if any(fnmatch.fnmatchcase(k, p) for p in patterns) else v
                for k, v in attributes.items()}

    if not patterns:
        return list(spans)
    return [{**s, "attributes": clean(s["attributes"]),
             "events": [{**e, "attributes": clean(e["attributes"])} for e in s["events"]]} for s in spans]


def parse_where(conditions: Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for condition in conditions:
        key, sep, value = condition.partition("=")
        if not sep or not key:
            raise ConfigError(f"--where {condition!r} is not ATTRIBUTE=VALUE",
                              where="--where", fix="write --where service.name=support-rag")
        pairs.append((key, value))
    return pairs


def _matches(spans: Sequence[dict], where: Sequence[tuple[str, str]]) -> bool:
    """Whether, for every condition, some span of the trace has that attribute with that value."""
    return all(any(str(s["attributes"].get(key)) == value for s in spans if key in s["attributes"])
               for key, value in where)


def _root(spans: Sequence[dict]) -> dict:
    ids = {s["span_id"] for s in spans}
    roots = [s for s in spans if not s["parent_span_id"] or s["parent_span_id"] not in ids]
    return min(roots or spans, key=lambda s: s["start_ns"])


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value and value != REDACTED else None


def case_of(trace_id: str, spans: list[dict], mappings: Mapping[str, Any]) -> dict | None:
    """One trace's case, or None when no question can be found in it."""
    spans = sorted(spans, key=lambda s: (s["start_ns"], s["end_ns"]))
    root = _root(spans)
    artifacts: dict[str, list] = {}
    for mapping in mappings.values():
        for kind, value in mapping.map(spans):
            artifacts.setdefault(kind, []).append(value)
    retrieval = (artifacts.get("retrieval/v1") or [None])[-1]
    question = _text(root["attributes"].get("input.value")) or _text((retrieval or {}).get("query"))
    if question is None:
        return None
    answer = _text(root["attributes"].get("output.value"))
    if answer is None:
        llm = [s for s in spans if "llm.output_messages.0.message.content" in s["attributes"]]
        answer = _text(llm[-1]["attributes"]["llm.output_messages.0.message.content"]) if llm else None
    metadata: dict = {"trace_id": trace_id, "production_answer": answer}
    if retrieval is not None:
        metadata["recorded_retrieval"] = retrieval
    if artifacts.get("citations/v1"):
        metadata["production_citations"] = artifacts["citations/v1"][-1]["ids"]
    return {"id": f"trace-{trace_id[:16]}", "input": {"question": question}, "expected": {}, "metadata": metadata}


def cases_from_spans(spans: Iterable[dict], mappings: Mapping[str, Any], *, where: Sequence[str] = (),
                     redact_patterns: Sequence[str] = (), sample: int | None = None,
                     seed: int = 0) -> tuple[list[dict], dict]:
    """The cases of ``spans`` and the figures (traces read, matched, without a question, written)."""
    conditions = parse_where(where)
    traces: dict[str, list[dict]] = {}
    for span in redact(spans, redact_patterns):
        traces.setdefault(span["trace_id"], []).append(span)
    matched = [t for t, s in traces.items() if _matches(s, conditions)]
    cases = [c for c in (case_of(t, traces[t], mappings) for t in matched) if c is not None]
    figures = {"traces": len(traces), "matched": len(matched), "no_question": len(matched) - len(cases)}
    if sample is not None:
        if sample < 1:
            raise ConfigError(f"--sample must be at least 1, got {sample}", where="--sample", fix="write --sample 100")
        if sample < len(cases):
            keep = set(random.Random(seed).sample(range(len(cases)), sample))
            cases = [c for i, c in enumerate(cases) if i in keep]  # the file's order, seeded choice
    figures["cases"] = len(cases)
    return cases, figures
