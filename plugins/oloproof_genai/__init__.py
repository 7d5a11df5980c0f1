"""The ``genai`` span mapping: spans with the OpenTelemetry GenAI semantic conventions.

- spans whose ``gen_ai.operation.name`` is ``retrieval`` (or ``retrieve``, ``search``): a
  ``retrieval/v1`` of ``gen_ai.retrieval.documents`` (a JSON list of ``{id, score, content}``),
  in its order; the query from ``gen_ai.retrieval.query.text``. The conventions have no settled
  retrieval attributes yet: this is the shape read until they do (docs/traces.md);
- model calls (``chat``, ``text_completion``, ``generate_content``, or any ``gen_ai.usage.*``):
  the prompt from ``gen_ai.input.messages`` (JSON), ``gen_ai.prompt`` or the
  ``gen_ai.*.message`` events, against the last retrieval: a ``context/v1`` by
  ``oloproof.context_from_prompt``; ``gen_ai.usage.input_tokens`` / ``output_tokens`` and the
  seconds of each operation: a ``usage/v1``.
"""

from __future__ import annotations

import json
from typing import Any

from oloproof import context_from_prompt, hookimpl

RETRIEVAL = ("retrieval", "retrieve", "search")
MODEL = ("chat", "text_completion", "generate_content")


def strings(value: Any) -> list[str]:
    """Every string inside a decoded JSON value, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def decoded(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def retrieval_of(attributes: dict) -> dict:
    documents = decoded(attributes.get("gen_ai.retrieval.documents"))
    candidates = []
    for document in documents if isinstance(documents, list) else ():
        if not isinstance(document, dict) or document.get("id") is None:
            continue
        passage: dict = {"doc_id": str(document["id"])}
        if isinstance(document.get("score"), (int, float)) and not isinstance(document["score"], bool):
            passage["score"] = document["score"]
        if isinstance(document.get("content"), str):
            passage["text"] = document["content"]
        candidates.append(passage)
    query = attributes.get("gen_ai.retrieval.query.text")
    return {"query": query if isinstance(query, str) else None, "depth": len(candidates), "candidates": candidates}


def prompt_of(span: dict) -> str:
    attributes = span["attributes"]
    parts = strings(decoded(attributes.get("gen_ai.input.messages"))) + strings(attributes.get("gen_ai.prompt"))
    for event in span["events"]:
        if event["name"].startswith("gen_ai.") and event["name"].endswith(("message", "prompt")):
            parts += [s for v in event["attributes"].values() for s in strings(decoded(v))]
    return "\n".join(parts)


class GenAI:
    produces = ("retrieval/v1", "context/v1", "usage/v1")

    def map(self, spans: list[dict]) -> list[tuple[str, Any]]:
        retrievals, prompts, tokens, stages = [], [], {}, {}
        for span in spans:
            attributes = span["attributes"]
            operation = attributes.get("gen_ai.operation.name")
            usage = {k: v for k, v in attributes.items() if k.startswith("gen_ai.usage.")}
            if not isinstance(operation, str) and not usage:
                continue
            stage = operation if isinstance(operation, str) else "model"
            stages[stage] = stages.get(stage, 0.0) + max(0, span["end_ns"] - span["start_ns"]) / 1e9
            if operation in RETRIEVAL:
                retrievals.append(retrieval_of(attributes))
            elif operation in MODEL or usage:
                prompts.append(prompt_of(span))
                for name, key in (("prompt", "gen_ai.usage.input_tokens"), ("completion", "gen_ai.usage.output_tokens")):
                    if isinstance(usage.get(key), int) and not isinstance(usage[key], bool):
                        tokens[name] = tokens.get(name, 0) + usage[key]
        recorded: list[tuple[str, Any]] = [("retrieval/v1", r) for r in retrievals]
        if retrievals and prompts:
            recorded.append(("context/v1", context_from_prompt(retrievals[-1], prompts[-1])))
        if stages:
            if "prompt" in tokens or "completion" in tokens:
                tokens["total"] = tokens.get("prompt", 0) + tokens.get("completion", 0)
            recorded.append(("usage/v1", {"tokens": tokens, "stages": stages}))
        return recorded


@hookimpl
def oloproof_register_span_mappings(registry):
    registry.add("genai", GenAI)
