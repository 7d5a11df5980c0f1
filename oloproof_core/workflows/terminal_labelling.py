"""``oloproof label RUN --terminal``: label a run's planned cases in the terminal.

Each planned case shows the question, the context the system was given, the answer and the
expected answer; the judge's verdict and rationale are shown only after the person has answered,
so that they cannot anchor on it. Keys: ``p`` pass, ``f`` fail, ``s`` skip, ``n`` add a note (then
answer), ``q`` stop (the labels made so far are kept). Each label is stored as soon as it is made.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from oloproof_core.model.errors import ConfigError
from oloproof_core.storage.labels import execution_digest, latest_plan, make_label, put_labels, stored_labels
from oloproof_core.storage.stores import resolve_reference

KEYS = {"p": "pass", "f": "fail", "s": "skip"}


def context_text(record: dict) -> list[str]:
    out = []
    for entry in (record.get("artifacts") or {}).get("context/v1", []):
        for item in entry.get("items", []):
            out.append(f"[{item.get('doc_id', '?')}] {item.get('text', '')}")
    return out


def text(value: Any) -> str:
    """A value as one line (the command escapes control characters when it prints)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def label_in_terminal(store: Any, run_id: str, criterion: str | None, labeller: str,
                      ask: Callable[[str], str], tell: Callable[[str], None]) -> int:
    """Label the planned, not yet labelled cases of the latest plan for ``run_id``; returns the count."""
    run_id = resolve_reference(store, run_id)
    found = latest_plan(store, run_id, criterion)
    if found is None:
        raise ConfigError(f"no label plan for run {run_id}" + (f" and criterion {criterion}" if criterion else ""),
                          fix=f"make one first: oloproof label plan {run_id}")
    plan_id, plan = found
    criterion = plan["criterion"]
    records = {r["id"]: r for r in store.run_cases(run_id)}
    done = stored_labels(store, criterion)
    todo = [case for case in plan["cases"] if (criterion, case, execution_digest(records[case])) not in done]
    tell(f"Labelling {criterion} on run {run_id}: {len(todo)} of {len(plan['cases'])} planned cases left "
         f"(plan {plan_id[:15]}…). Keys: p pass, f fail, s skip, n note, q stop.")
    made = 0
    for index, case in enumerate(todo, 1):
        record = records[case]
        tell("")
        tell(f"── case {index} of {len(todo)}: {case}")
        question = record["case"].get("input")
        tell("Question: " + text(question.get("question", question) if isinstance(question, dict) else question))
        for line in context_text(record) or ["(none recorded)"]:
            tell("Context: " + text(line))
        output = record.get("output")
        tell("Answer: " + text(output.get("answer", output) if isinstance(output, dict) else output))
        expected = record["case"].get("expected") or {}
        if expected:
            tell("Expected: " + text(expected.get("answer", expected)))
        note = ""
        while True:
            key = ask(f"Does it meet {criterion}? [p/f/s/n/q] ").strip().lower()[:1]
            if key == "n":
                note = ask("Note: ").strip()
                continue
            if key == "q":
                tell(f"Stopped: {made} labels stored.")
                return made
            if key in KEYS:
                break
            tell("Answer p (pass), f (fail), s (skip), n (note) or q (stop).")
        put_labels(store, [make_label(run_id, case, criterion, KEYS[key], execution_digest(record), labeller, note)])
        made += 1
        judgment = record["judgments"].get(criterion, {})
        detail = judgment.get("detail") or {}
        tell(f"Judge: {judgment.get('status')}" + (f" ({text(detail['rationale'])})" if detail.get("rationale") else ""))
    tell(f"Done: {made} labels stored. Next: oloproof run (the gate decides on the human-level interval)")
    return made
