"""``oloproof inspect RUN --case ID`` for a person, rendered from the viewer's case view model
(views.case_view): the input, expected and output as indented, wrapped text; the retrieval as a
table; the context and its token budget; the citations, valid or not; each judgment and its reason.

Every recorded text is made printable (terminal control characters escaped) before it is wrapped.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from typing import Any

from oloproof_core.statistics.display import fixed
from oloproof_core.outputs.report import judgment_word, printable
from oloproof_core.statistics.display import table

INDENT = "  "


def _text(text: str, indent: str, width: int, first: str = "") -> list[str]:
    """``first`` then ``text``, its own lines kept, each wrapped to ``width`` under ``indent``."""
    out: list[str] = []
    for k, part in enumerate(str(text).split("\n")):
        head = indent + (first if k == 0 else "")
        rest = indent + " " * (len(first) if first else 0)
        wrapped = textwrap.wrap(printable(part), width=max(20, width), initial_indent=head, subsequent_indent=rest,
                                break_long_words=True, break_on_hyphens=False, drop_whitespace=True)
        out += wrapped or [head.rstrip()]
    return out


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def value_lines(value: Any, indent: str, width: int) -> list[str]:
    """A recorded value for reading: a mapping key by key and a list item by item (``- ``), text
    wrapped under its key, and what fits on a line as JSON on that line."""
    if isinstance(value, Mapping) and value:
        out: list[str] = []
        for key, item in value.items():
            out += _field(str(key), item, indent, width)
        return out
    if isinstance(value, str):
        return _text(value, indent, width)
    one = _json(value)
    if not isinstance(value, list) or not value or len(indent) + len(one) <= width:
        return [indent + printable(one)]
    out = []
    for item in value:  # each item under "- ", its further lines indented to match
        lines = value_lines(item, indent + INDENT, width)
        out += [indent + "- " + lines[0][len(indent) + 2:], *lines[1:]]
    return out


def _field(key: str, item: Any, indent: str, width: int) -> list[str]:
    label = f"{printable(key)}: "
    if isinstance(item, str):
        return _text(item, indent, width, first=label)
    one = _json(item)
    if len(indent) + len(label) + len(one) <= width or not isinstance(item, (Mapping, list)) or not item:
        return [indent + label + printable(one)]
    return [indent + label.rstrip(), *value_lines(item, indent + INDENT, width)]


def _passage_id(item: Mapping[str, Any]) -> str:
    doc, chunk = item.get("doc_id"), item.get("chunk_id")
    return f"{doc}#{chunk}" if chunk is not None else str(doc)


def _score(score: Any) -> str:
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return fixed(float(score), 3)
    return "" if score is None else printable(str(score))


def traceback_lines(frames: Any, indent: str, width: int) -> list[str]:
    """Where the project's code raised (stored with the missing execution): one line a frame,
    ``app.py:12 in run: return PLANETS[q]``, innermost last, as Python prints a traceback."""
    if not frames or not isinstance(frames, list):
        return []
    out = [printable(f"{indent}Traceback (the project's frames, most recent call last):")]
    for frame in frames:
        if isinstance(frame, dict):
            code = f": {frame.get('code')}" if frame.get("code") else ""
            out += _text(f"{frame.get('file')}:{frame.get('line')} in {frame.get('function')}{code}",
                         indent * 2, width)
    return out


def render_case(view: Mapping[str, Any], width: int) -> list[str]:
    """The lines of one case; ``width`` is where long text wraps (tables are fitted when printed)."""
    record, case = view["record"], view["case"]
    out = [printable(f"Case {record['id']} of {view['run']['id']}"), *earlier_turns(view, width)]
    out += ["Input", *value_lines(case.get("input"), INDENT, width)]
    out += ["Expected", *value_lines(case.get("expected"), INDENT, width)]
    if case.get("metadata"):
        out += ["Metadata", *value_lines(case["metadata"], INDENT, width)]
    if "missing" in record:
        out += ["Output", *_text(f"missing: {record['missing']}", INDENT, width)]
        out += traceback_lines(record.get("traceback"), INDENT, width)
    else:
        out += ["Output" + (f" (trial 1 of {len(view['trials'])})" if view.get("trials") else ""),
                *value_lines(record.get("output"), INDENT, width)]
    if view.get("trials"):
        out.append("Trials")
        for trial in view["trials"]:
            verdicts = ", ".join(f"{name} {judgment_word(j)}" for name, j in trial["judgments"].items())
            out += _text(f"trial {trial['trial']}: {verdicts}", INDENT, width)
            out += (_text(f"missing: {trial['missing']}", INDENT * 2, width) if trial.get("missing")
                    else value_lines(trial.get("output"), INDENT * 2, width))
    out += ["", *_retrieval(view, width)] if view.get("retrieval") is not None else []
    out += ["", *_context(view, width)] if view.get("context") is not None else []
    if view["citations"]:
        out.append("Citations: " + " · ".join(
            printable(f"{c['id']}: valid" if c["valid"] else f"{c['id']}: invalid (not in the context)")
            for c in view["citations"]))
    out += ["", *_judgments(view, width)]
    for d in view["diagnoses"]:
        out.append(printable(f"Diagnosis {d['id'][:17]}… ({d['intervention']}): {d['label']}, {d['reason']}"
                             + (f", {d['evidence']}" if d.get("evidence") else "")))
    if view["other_artifacts"]:
        out += ["", "Other artifacts"]
        for kind, items in view["other_artifacts"].items():
            for item in items:
                out += _field(kind, item, INDENT, width)
    return out


def earlier_turns(view: Mapping[str, Any], width: int) -> list[str]:
    """A conversation's turn: which turn of how many, and the turns before it as this turn received
    them (``case.history``: each earlier input and the system's output), one line each, cut to
    ``width``."""
    conversation, history = view.get("conversation"), view["case"].get("history")
    if not conversation and not history:
        return []
    if conversation:
        head = f"Conversation {conversation['id']}: turn {conversation['turn']} of {len(conversation['turns'])}"
    else:
        head = "Conversation turn"
    if not history:
        return [printable(head)]
    out = [printable(head + "; the turns before it, as it received them:")]
    for k, entry in enumerate(history, 1):
        entry = entry if isinstance(entry, Mapping) else {}
        for label, key in ((f"{k} input:  ", "input"), (" " * len(str(k)) + " output: ", "output")):
            line = printable(INDENT + label + _json(entry.get(key)))
            out.append(line if len(line) <= max(20, width) else line[:max(20, width) - 1] + "…")
    return out


def _retrieval(view: Mapping[str, Any], width: int) -> list[str]:
    retrieval = view.get("retrieval")
    if retrieval is None:
        return []
    unit = view["relevance_unit"]
    about = [f"query {_json(retrieval.get('query'))}" if retrieval.get("query") is not None else None,
             f"depth {retrieval['depth']}" if retrieval.get("depth") is not None else None,
             f"{len(view['candidates'])} candidates",
             (f"relevant at relevance_unit {unit}" + (f" as judged by {view['judged_by']} (an LLM judge)"
                                                       if view.get("judged_by") else ""))
             if view["labels"] else "no relevance labels"]
    head = _text("Retrieval: " + ", ".join(a for a in about if a), "", width)
    if not view["candidates"]:
        return head
    rows = [[str(p["rank"]), _score(p["score"]), printable(_passage_id(p)),
             f"yes ({p['relevant']})" if p["relevant"] else ("no" if view["labels"] else ""),
             printable(p["fate"])] for p in view["candidates"]]
    return [*head, *table(["rank", "score", "id", "relevant", "context"], rows)]


def _context(view: Mapping[str, Any], width: int) -> list[str]:
    context = view.get("context")
    if context is None:
        return []
    items = context.get("items", [])
    budget = context.get("token_budget")
    used = f"{view['tokens_used']} of a budget of {budget} tokens used" if budget is not None else (
        f"{view['tokens_used']} tokens")
    dropped = context.get("dropped", [])
    out = _text(f"Context: {len(items)} passage{'' if len(items) == 1 else 's'} · {used}"
                + (f" · {len(dropped)} dropped" if dropped else "")
                + (f" · source {context['source']}" if context.get("source") else ""), "", width)
    for item in items:
        tokens = item.get("tokens")
        label = f"{item.get('position', '')}. {_passage_id(item)} ({'?' if tokens is None else tokens} tokens): "
        out += _text(item.get("text") or "", INDENT, width, first=label)
    return out


def _judgments(view: Mapping[str, Any], width: int) -> list[str]:
    out = ["Judgments"]
    for name, j in view["judgments"].items():
        reason = f" ({j['reason']})" if j.get("reason") and j["status"] in ("pass", "fail") else ""
        out += _text(f"{name}: {judgment_word(j)}{reason}", INDENT, width)
        detail = j.get("detail") or {}
        for key, value in detail.items():
            if key == "usage" or value is None:
                continue
            if key == "claims" and isinstance(value, list) and all(isinstance(c, Mapping) for c in value):
                out.append(INDENT * 2 + "claims:")
                for c in value:  # a claim-level judge: each claim's verdict and the passage behind it
                    where = f" by {c['passage']}" if c.get("passage") else ""
                    out += _text(f"{c.get('verdict')}{where}: {c.get('claim')}", INDENT * 3, width, first="- ")
                    if c.get("rationale"):
                        out += _text(str(c["rationale"]), INDENT * 4, width)
                continue
            label = "raw reply" if key == "raw" else key
            out += _field(label, value, INDENT * 2, width)
    return out
