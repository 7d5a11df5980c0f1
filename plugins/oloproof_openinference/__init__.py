"""The ``openinference`` span mapping: spans with OpenInference attributes become artifacts.

- each RETRIEVER span (``openinference.span.kind``, or any ``retrieval.documents.N.document.*``
  attribute): a ``retrieval/v1`` of its documents in the order the span lists them (never
  re-sorted): ``document.id`` as ``doc_id``, ``document.score``, ``document.content`` as text;
  ``input.value`` the query; ``retrieval.depth`` the depth when the app sets it, else the count;
- the LLM span's prompt (``llm.input_messages.N.message.content``, else ``input.value``) against
  the last retrieval: a ``context/v1`` by ``oloproof.context_from_prompt`` (docs/traces.md);
- ``llm.token_count.prompt/completion/total`` (summed over LLM spans) and the seconds of each
  span kind: a ``usage/v1``;
- ``output.citations`` (a list of ids) on any span, when the app records it: a ``citations/v1``.
"""

from __future__ import annotations

from typing import Any

from oloproof import context_from_prompt, hookimpl

KIND = "openinference.span.kind"
TOKENS = tuple((name, f"llm.token_count.{name}") for name in ("prompt", "completion", "total"))
INDEXED = ("retrieval.documents", "llm.input_messages")  # the ``prefix.N.field`` attributes read
_KEYS: dict[str, tuple | None] = {}  # attribute key -> (prefix, N, field), or None: keys repeat across spans
MOST_KEYS = 65_536


def key_parts(key: str) -> tuple | None:
    """(prefix, N, field) of an ``INDEXED`` prefix's ``prefix.N.field`` attribute key, else None
    (remembered in ``_KEYS``, up to ``MOST_KEYS`` keys)."""
    parts = None
    for prefix in INDEXED:
        if key.startswith(prefix) and key[len(prefix):len(prefix) + 1] == ".":
            number, dot, field = key[len(prefix) + 1:].partition(".")
            if dot and field and number.isdecimal() and number.isascii():
                parts = (prefix, int(number), field)
            break
    if len(_KEYS) < MOST_KEYS:
        _KEYS[key] = parts
    return parts


def indexed_all(attributes: dict) -> dict[str, list[dict]]:
    """Every ``INDEXED`` prefix's ``prefix.N.field`` attributes, each as a list of {field: value}
    in N's order, in one pass over the span's attributes."""
    found: dict[str, dict[int, dict]] = {}
    for key, value in attributes.items():
        parts = _KEYS.get(key, False)
        if parts is False:
            parts = key_parts(key)
        if parts is not None:
            prefix, number, field = parts
            by_number = found.get(prefix)
            if by_number is None:
                by_number = found[prefix] = {}
            item = by_number.get(number)
            if item is None:
                item = by_number[number] = {}
            item[field] = value
    return {prefix: [by_number[i] for i in sorted(by_number)] for prefix, by_number in found.items()}


def kind_of(span: dict) -> str | None:
    kind = span["attributes"].get(KIND)
    if isinstance(kind, str):
        return kind.upper()
    if any(k.startswith("retrieval.documents.") for k in span["attributes"]):
        return "RETRIEVER"
    if any(k.startswith(("llm.input_messages.", "llm.token_count.")) for k in span["attributes"]):
        return "LLM"
    return None


def retrieval_of(attributes: dict, documents: list[dict]) -> dict:
    """A RETRIEVER span's ``retrieval/v1`` from its attributes and its ``documents`` (indexed_all)."""
    candidates = []
    for document in documents:
        if document.get("document.id") is None:
            continue
        passage: dict = {"doc_id": str(document["document.id"])}
        score = document.get("document.score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            passage["score"] = score
        if isinstance(document.get("document.content"), str):
            passage["text"] = document["document.content"]
        candidates.append(passage)
    depth = attributes.get("retrieval.depth")
    depth = depth if isinstance(depth, int) and depth >= len(candidates) else len(candidates)
    query = attributes.get("input.value")
    return {"query": query if isinstance(query, str) else None, "depth": depth, "candidates": candidates}


def prompt_of(attributes: dict, messages: list[dict]) -> str:
    """An LLM span's prompt: its input ``messages`` (indexed_all), else its ``input.value``."""
    parts = []
    for message in messages:
        if isinstance(message.get("message.content"), str):
            parts.append(message["message.content"])
        parts += [v for k, v in message.items() if k.startswith("message.contents.") and isinstance(v, str)
                  and k.endswith("message_content.text")]
    if not parts and isinstance(attributes.get("input.value"), str):
        parts.append(attributes["input.value"])
    return "\n".join(parts)


class OpenInference:
    produces = ("retrieval/v1", "context/v1", "usage/v1", "citations/v1")

    def map(self, spans: list[dict]) -> list[tuple[str, Any]]:
        recorded: list[tuple[str, Any]] = []
        retrievals, prompts, tokens, stages, citations = [], [], {}, {}, None
        for span in spans:
            kind = kind_of(span)
            if kind is None:
                continue
            attributes = span["attributes"]
            stage = kind.lower()
            stages[stage] = stages.get(stage, 0.0) + max(0, span["end_ns"] - span["start_ns"]) / 1e9
            if kind == "RETRIEVER":
                retrievals.append(retrieval_of(attributes, indexed_all(attributes).get("retrieval.documents", [])))
            elif kind == "LLM":
                prompts.append(prompt_of(attributes, indexed_all(attributes).get("llm.input_messages", [])))
                for name, key in TOKENS:
                    value = attributes.get(key)
                    if isinstance(value, int) and not isinstance(value, bool):
                        tokens[name] = tokens.get(name, 0) + value
            cited = attributes.get("output.citations")
            if isinstance(cited, list):
                citations = [str(c) for c in cited]
        recorded += [("retrieval/v1", r) for r in retrievals]
        if retrievals and prompts:
            recorded.append(("context/v1", context_from_prompt(retrievals[-1], prompts[-1])))
        if citations is not None:
            recorded.append(("citations/v1", {"ids": citations}))
        if stages:
            recorded.append(("usage/v1", {"tokens": tokens, "stages": stages}))
        return recorded


@hookimpl
def oloproof_register_span_mappings(registry):
    registry.add("openinference", OpenInference)
