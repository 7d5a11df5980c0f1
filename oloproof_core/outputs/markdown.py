"""A compact Markdown summary of a run or a comparison, for a pull-request comment or a CI job's
summary page: the gate, the rules, the metric table and, for a comparison, the cases that changed
verdict."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from oloproof_core.results.view import RUN_FORMAT

CHANGED_SHOWN = 20  # a comment stays readable; the JSON document lists every changed case
MARK = {"passed": "✅", "failed": "❌", "skipped": "⚠️", "undecided": "⏸️"}


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|",
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows)]


def _gate_line(view: Mapping[str, Any]) -> str:
    gate = view["gate"]
    verdict = gate["verdict"]
    if verdict is None:
        return f"**Gate: none** (no policy; exit {view['exit_code']})"
    if verdict == "UNDECIDED":
        return f"**Gate: UNDECIDED** (the run was interrupted; exit {view['exit_code']})"
    return f"**Gate: {verdict}** (exit {view['exit_code']})"


def _rules(view: Mapping[str, Any]) -> list[str]:
    if not view["decisions"]:
        return []
    rows = [[f"{MARK[d['outcome']]} {d['rule']}", d["metric"], d["description"],
             d["verdict"] or "—", d["reason"]] for d in view["decisions"]]
    return ["", *_table(["rule", "metric", "rule kind", "verdict", "reason"], rows)]


# control characters (C0 but tab and line feed, DEL, C1) and the bidirectional controls: a step
# summary is a web page, where they do nothing good
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def markdown_safe(text: str) -> str:
    """``text`` as GitHub renders it harmlessly: HTML escaped (``<script>`` is shown, not run),
    control characters stripped. The summary's own markup uses none of ``&<>``."""
    return html.escape(_CONTROLS.sub("", text), quote=False)


def render_markdown(view: Mapping[str, Any]) -> str:
    """The summary as Markdown text, ending with a newline; whatever a run holds is
    :func:`markdown_safe`."""
    return markdown_safe(_render(view))


def _render(view: Mapping[str, Any]) -> str:
    if view["format"] == RUN_FORMAT:
        run = view["run"]
        chosen = run.get("selection")
        cases = f"{run['cases']} of {chosen['of']} cases (a subset: {chosen['flags']})" if chosen else f"{run['cases']} cases"
        out = [f"### Oloproof run `{run['id']}` [{run['state']}]", "",
               f"{run['system']['name']} {run['system']['version']} · {cases} · "
               f"{100 * view['confidence_level']:g}% intervals", "", _gate_line(view), *_rules(view), "",
               *_table(["metric", "estimate", "interval", "counts"],
                       [[m["name"], *m["display"].values()] for m in view["metrics"]])]
        units = view.get("units")
        if units:  # trials or clusters: the same lines the terminal prints
            from oloproof_core.outputs.report import unit_lines

            instability = {u["criterion"]: u for u in units.get("instability", [])}
            lines = unit_lines({"instability": instability, "clusters": units.get("clusters")}, units,
                               view["confidence_level"])
            out += [f"- {line}" if line else line for line in lines]  # one list item a line
        if view["missing"]["cases"]:
            reasons = "; ".join(f"{r['reason']} ({r['cases']})" for r in view["missing"]["reasons"][:3])
            out += ["", f"Missing: {view['missing']['cases']} of {run['cases']} cases produced no output: {reasons}"]
        return "\n".join(out) + "\n"
    out = [f"### Oloproof comparison of `{view['candidate']['id']}` against `{view['baseline']['id']}`", "",
           f"{view['paired_cases']} paired cases · {100 * view['confidence_level']:g}% intervals · `{view['id']}`", "",
           _gate_line(view), *_rules(view), "",
           *_table(["metric", "difference", "interval", "counts"],
                   [[m["name"], (m["display"] or {}).get("difference", "—"), (m["display"] or {}).get("interval") or "—",
                     f"{m['paired']} paired · {m['missing']} missing · {m['excluded']} excluded"]
                    for m in view["metrics"]])]
    planning = [line for d in view["decisions"] if d.get("planning")
                for line in [f"- {d['rule']}: {d['planning']}"]
                + ([f"- {d['rule']}: {d['power']['line']}"] if d.get("power") else [])]
    if planning:
        out += ["", *planning]
    changed = view["changed_cases"]
    out += ["", f"**Cases that changed verdict: {len(changed)}**"]
    if changed:
        out += ["", *_table(["case", "criterion", "baseline", "candidate"],
                            [[c["case"], c["criterion"], c["baseline"], c["candidate"]] for c in changed[:CHANGED_SHOWN]])]
        if len(changed) > CHANGED_SHOWN:
            out += ["", f"… and {len(changed) - CHANGED_SHOWN} more (the JSON document lists them all)"]
    return "\n".join(out) + "\n"
