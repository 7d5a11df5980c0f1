"""The comparison's terminal text, rendered from its view (the layout docs/compare.md shows)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def paired_line(entry: Mapping[str, Any]) -> str:
    """``answer_correct: +6.7 points [-26.5, +40.8] · 15 paired · 0 missing · 0 excluded``."""
    shown = entry["display"]
    if shown is None:
        head = "no paired observations"
    else:
        head = shown["difference"] + (f" {shown['interval']}" if shown["interval"] else "")
    paired = f"{entry['paired']} paired" + (f" {entry['unit']}" if entry.get("unit") else "")
    return f"{entry['name']}: {head} · {paired} · {entry['missing']} missing · {entry['excluded']} excluded"


def comparison_header(view: Mapping[str, Any]) -> str:
    return (f"Comparison {view['id']} of {view['candidate']['id']} against {view['baseline']['id']}"
            f" · {view['paired_cases']} paired cases")


def comparison_body(view: Mapping[str, Any], show_slices: bool) -> list[str]:
    """Everything below the header line; the slice differences listed, or only counted."""
    body: list[str] = []
    units = view.get("units")
    if units:  # trials or clusters: what a pair is
        trials = units["trials"]
        line = "Pairs: " + (f"cluster means by {units['cluster']}" if units["cluster"] else "cases")
        if max(trials.values()) > 1:
            line += (f"; a case's value is its mean over its trials ({trials['candidate']} in the candidate, "
                     f"{trials['baseline']} in the baseline)")
        body.append(line)
    unpaired = view["unpaired"]
    if unpaired["candidate_only"] or unpaired["baseline_only"]:
        body.append(f"Unpaired: {unpaired['candidate_only']} only in {view['candidate']['id']}, "
                    f"{unpaired['baseline_only']} only in {view['baseline']['id']}")
    for role in ("candidate", "baseline"):  # a subset run is said to be one
        chosen = view[role].get("selection")
        if chosen:
            body.append(f"Subset: {view[role]['id']} ran {chosen['selected']} of {chosen['of']} cases "
                        f"({chosen['flags']})")
    if view["not_compared"]:
        body.append("Not compared: " + "; ".join(f"{c['criterion']} only in {c['only_in']}" for c in view["not_compared"]))
    for entry in view["metrics"]:
        body.append(paired_line(entry))
        body += [f"  excluded {r['pairs']}: {r['reason']}" for r in entry["excluded_reasons"]]
        body += [f"  missing {r['pairs']}: {r['reason']} ({r['run']})" for r in entry["missing_reasons"]]
        if entry["evaluator_changed"]:
            body.append("  evaluator config differs between the runs")
    slices = [f"  {s['slice']}={s['group']} · {paired_line(s)}" for s in view["slices"]]
    if show_slices:
        body += ["Exploratory slice differences (never gate)", *slices]
    else:
        body.append(f"{len(slices)} exploratory slice differences not shown; add --slices to list them")
    body.append("Decisions")
    for d in view["decisions"]:
        body.append(f"  {d['rule']}  {d['metric']}  {d['description']}  {d['verdict']}  {d['reason']}")
        if d["planning"]:
            body.append(f"    {d['planning']}")
    body.append(f"Gate: {view['gate']['verdict']} (exit {view['exit_code']})")
    return body


def render_comparison(view: Mapping[str, Any], show_slices: bool) -> list[str]:
    """The documented layout of ``oloproof compare``."""
    return [comparison_header(view), *comparison_body(view, show_slices)]
