"""What ``oloproof headroom`` and ``oloproof inspect HEADROOM_ID`` print, and its JSON document.

A row is what one intervention bought on these cases beside its own control: a candidate
experiment to test with a new run and ``oloproof compare``, never a cause.
"""

from __future__ import annotations

from oloproof_core.statistics.display import pct, table

HEADROOM_FORMAT = "oloproof.headroom"
VERSION = 1
HYPOTHESIS = "This is a hypothesis to test, not an established cause."
GOLD_NOTE = ("gold context replaces the assembled context with the gold passages: its row is an upper bound on "
             "what better retrieval and context assembly could buy, not a change to ship")


def _names(ids: list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _tokens(cost: dict) -> str:
    mine, control = cost.get("context_tokens"), cost.get("control_context_tokens")
    if mine is None and control is None:
        return "not recorded"
    return f"{'-' if mine is None else mine} vs {'-' if control is None else control}"


def row_cells(rank: int, row: dict) -> list[str]:
    """One table row: rank, intervention, difference, interval, pairs, fixed, broken, calls, tokens."""
    if not row["supported"]:
        return ["-", row["label"], "not supported", "", "0", "", "", "0", ""]
    if "paired" not in row:
        return ["-", row["label"], "no case to run", "", "0", "", "", "0", ""]
    entry, cost = row["paired"], row["cost"]
    display = entry.get("display") or {}
    difference = display.get("difference") or "no pairs"
    pairs = str(entry["paired"]) + (f" (+{entry['missing']} missing)" if entry.get("missing") else "")
    return [str(rank), row["label"], difference, display.get("interval") or "", pairs, str(len(row["fixed"])),
            str(len(row["broken"])), f"{cost['calls']} + {cost['control_calls']}", _tokens(cost)]


def headroom_lines(object_id: str, record: dict) -> list[str]:
    """Everything ``oloproof headroom`` prints: the header, the ranked table, each row's fixed and
    broken cases, what was not run, the candidate-experiment wording, the ids."""
    unit = "paired clusters" if record["unit"] == "clusters" else "paired cases"
    trials = f"; a case's value is its mean over its {record['trials']} trials" if record["trials"] > 1 else ""
    sequential = record.get("sequential")
    lines = [f"Headroom on {record['criterion']}: {record['cases']} cases of {record['run']}, each intervention "
             "beside its own control (observed; no population claim)",
             f"Ranked by the lower bound of the gain: the paired difference against the control, "
             f"{pct(record['confidence_level'])} interval over {unit}{trials}"]
    if sequential:
        margin = sequential.get("margin")
        lines.append(f"Until decided: cases in an order drawn from seed {sequential['seed']}, looked at every "
                     f"{sequential['batch']}; each intervention stops once its interval (a confidence sequence, valid "
                     "at every look) excludes zero" + (f" or lies below +{margin * 100:.1f} points" if margin else ""))
    header = ["rank", "intervention", "difference", "interval", unit.split()[1], "fixed", "broken",
              "calls (+ control)", "context tokens (vs control)"]
    ranked = [r for r in record["rows"] if (r.get("paired") or {}).get("low") is not None]
    rest = [r for r in record["rows"] if r not in ranked]
    lines += table(header, [row_cells(i, r) for i, r in enumerate(ranked, 1)] + [row_cells(0, r) for r in rest])
    for row in record["rows"]:
        if row.get("fixed"):
            lines.append(f"Fixed under {row['label']}: {_names(row['fixed'])}")
        if row.get("broken"):
            lines.append(f"Broken under {row['label']}: {_names(row['broken'])}")
        if row.get("not_run"):
            lines.append(f"Not run under {row['label']}: {len(row['not_run'])} cases, no_gold_context")
        if not row["supported"] and row.get("unsupported") == "no_override":
            lines.append(f"Not run under {row['label']}: the service does not declare where its request takes this "
                         "intervention's override (system.http.interventions), so no case was re-executed")
        elif not row["supported"]:
            lines.append(f"Not run under {row['label']}: the system is not staged, so no case was re-executed")
        stopped = row.get("stopped")
        if stopped:
            why = {"interval_excludes_zero": "its interval excludes zero",
                   "interval_below_margin": "its interval lies below the margin"}.get(stopped["reason"])
            lines.append(f"Stopped under {row['label']}: after {stopped['after']} of {stopped['of']} cases "
                         f"({stopped['looks']} looks), {why}" if why else
                         f"Stopped under {row['label']}: never; all {stopped['of']} cases ran "
                         f"({stopped['looks']} looks) and the interval decided nothing")
    if any(r["intervention"] == "gold-context" and "paired" in r for r in record["rows"]):
        lines.append(f"Note: {GOLD_NOTE}.")
    above = [r["label"] for r in ranked if r["paired"]["low"] > 0]
    lines.append(f"Interval above zero: {', '.join(above)}" if above else
                 f"Interval above zero: none of {len(ranked)}; no gain is established on these cases")
    shippable = [r for r in ranked if r["intervention"] != "gold-context"]  # gold context is a bound, not a change
    if shippable and shippable[0]["paired"]["difference"] > 0:
        lines.append(f"Candidate experiment: {shippable[0]['label']}, the highest lower bound of the gain among the "
                     f"changes measured. {HYPOTHESIS}")
    elif shippable:
        lines.append("Candidate experiment: none; no change measured gained on these cases")
    return lines


def summary_lines(object_id: str, record: dict) -> list[str]:
    """:func:`headroom_lines`, then the headroom's id, its child runs and how to see it again."""
    lines = headroom_lines(object_id, record)
    lines.append(f"Headroom {object_id}")
    if record["children"]:
        lines.append("Child runs: " + ", ".join(f"{role} {run}" for role, run in record["children"]))
    return lines


def headroom_document(object_id: str, record: dict) -> dict:
    """The ``--format json`` view: the stored record, with its format, version and id."""
    return {"format": HEADROOM_FORMAT, "version": VERSION, "id": object_id,
            **{k: v for k, v in record.items() if k != "kind"}}


def headroom_rows(record: dict) -> list[dict]:
    """The viewer's headroom table: each row's cells and its interval on one symmetric axis in
    points, shared by every row so that their intervals compare at a glance (0-100 SVG units)."""
    ranked = [r for r in record["rows"] if (r.get("paired") or {}).get("low") is not None]
    rest = [r for r in record["rows"] if r not in ranked]
    reach = max([5.0, *(100 * abs(r["paired"][k]) for r in ranked for k in ("low", "high"))])

    def at(x: float) -> float:
        return round(50 + 50 * 100 * x / reach, 2)

    out = []
    for rank, row in [(i, r) for i, r in enumerate(ranked, 1)] + [(0, r) for r in rest]:
        cells = row_cells(rank, row)
        entry = {"label": row["label"], "intervention": row["intervention"], "cells": cells,
                 "fixed": row.get("fixed", []), "broken": row.get("broken", []), "run": row.get("run"),
                 "control_run": row.get("control_run"), "stopped": row.get("stopped"), "x": None,
                 "axis": [f"{-reach:+.1f}", f"{reach:+.1f}"]}
        if rank:
            paired = row["paired"]
            entry["x"] = {"value": at(paired["difference"]), "low": at(paired["low"]), "high": at(paired["high"])}
        out.append(entry)
    return out


def headroom_markdown(object_id: str, record: dict) -> str:
    """The headroom as Markdown (``--markdown FILE``): the words of the terminal, the table as a
    Markdown table, each fixed and broken case named."""
    lines = headroom_lines(object_id, record)
    words = [line for line in lines if not line.startswith(("┌", "│", "├", "└"))]
    table = [line for line in lines if line.startswith("│")]
    cells = [[c.strip().replace("|", "\\|") for c in line.strip("│").split("│")] for line in table]
    out = [f"## {words[0].split(':')[0]}", "", words[0].split(": ", 1)[1], "", words[1], ""]
    if cells:
        out += ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
        out += ["| " + " | ".join(row) + " |" for row in cells[1:]]
        out.append("")
    out += [f"- {line}" for line in words[2:]]
    out += ["", f"Headroom `{object_id}`"]
    return "\n".join(out) + "\n"
