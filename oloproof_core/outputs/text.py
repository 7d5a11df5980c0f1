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


CHANGED_SHOWN = 5  # cases listed under "Changed verdicts" without --cases


def changed_lines(view: Mapping[str, Any], show_all: bool) -> list[str]:
    """``Changed verdicts: 2 on 1 case (2 fixed, 0 broken)``, then a line a case: its criteria by direction.

    :param show_all: every case (``--cases``); else the first ``CHANGED_SHOWN`` and a count of the rest.
    """
    from oloproof_core.results.view import change_of

    by_case: dict[str, dict[str, list[str]]] = {}
    totals = {"fixed": 0, "broken": 0, "changed": 0}
    for entry in view["changed_cases"]:
        change = change_of(entry)
        totals[change] += 1
        by_case.setdefault(entry["case"], {}).setdefault(change, []).append(entry["criterion"])
    if not by_case:
        return ["Changed verdicts: none (no paired case passes or fails differently)"]
    counts = f"{totals['fixed']} fixed, {totals['broken']} broken" + (
        f", {totals['changed']} between failed and missing" if totals["changed"] else "")
    total = sum(totals.values())
    out = [f"Changed verdicts: {total} on {len(by_case)} case{'' if len(by_case) == 1 else 's'} ({counts})"]
    shown = list(by_case.items()) if show_all else list(by_case.items())[:CHANGED_SHOWN]
    for case_id, changes in shown:
        out.append(f"  {case_id}  " + " · ".join(f"{change}: {', '.join(criteria)}" for change, criteria in changes.items()))
    if len(shown) < len(by_case):
        out.append(f"  … and {len(by_case) - len(shown)} more; add --cases to list them all")
    return out


def render_comparison(view: Mapping[str, Any], show_slices: bool, show_cases: bool = False) -> list[str]:
    """The documented layout of ``oloproof compare``; the cases that changed verdict follow the gate."""
    return [comparison_header(view), *comparison_body(view, show_slices), *changed_lines(view, show_cases)]


def stored_comparison(object_id: str, record: Mapping[str, Any]) -> list[str]:
    """A stored comparison as ``inspect`` and the viewer show it: as ``compare --slices --cases``
    prints it (a record stored before the record kept its view keeps its printed lines)."""
    if "view" not in record:
        return list(record.get("lines", []))
    return render_comparison({**record["view"], "id": object_id}, show_slices=True, show_cases=True)
