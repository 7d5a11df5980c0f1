"""The lines of ``oloproof run`` about judge criteria: the human-level pass rate beside the judge's
own, and what each rule on a judge criterion decides on."""

from __future__ import annotations

from typing import Any

from oloproof_core.statistics.display import pct, percent, percent_bounds, table


def labels_phrase(record: dict) -> str:
    return f"human-level, from {record['labels']} label{'s' if record['labels'] != 1 else ''}"


def human_lines(outcome: Any, confidence: float) -> list[str]:
    """A table of each judge criterion with labels, then one line per rule on a judge criterion."""
    human = getattr(outcome, "human", None) or {}
    if not human:
        return []
    out = []
    rows = []
    for criterion, record in human.items():
        if record is None:
            continue
        s = outcome.summaries[criterion]
        t = record["table"]
        strata = (f"{t['judge_pass_human_pass'] + t['judge_pass_human_fail']} of {record['judge_passes']} judge passes, "
                  f"{t['judge_fail_human_pass'] + t['judge_fail_human_fail']} of "
                  f"{record['judged'] - record['judge_passes']} judge fails")
        rows.append([criterion, s.cells[0], "—" if record["value"] is None else percent(record["value"]),
                     percent_bounds(record["low"], record["high"]), f"{record['labels']} labels ({strata})"])
    if rows:
        out += ["", "Human level: the pass rate people would give, from the judge's verdicts and the labels "
                    "(stratified by verdict, exact bounds)"]
        out += table(["criterion", "judge's rate", "human-level", f"{pct(confidence)} interval", "from"], rows)
    lines = []
    for d in outcome.decisions:
        if d.metric not in human:
            continue
        record = human[d.metric]
        if record is not None and d.reason != "judge_not_validated":
            lines.append(f"Rule {d.rule} decides on {d.metric} {labels_phrase(record)}: "
                         f"{percent_bounds(record['low'], record['high'])}, not the judge's rate")
        elif d.reason == "judge_not_validated":
            lines.append(f"Rule {d.rule} waits for a person: no labels of {d.metric} on this run and no validated "
                         f"judge (label some: oloproof label plan {outcome.run_id})")
        else:
            lines.append(f"Rule {d.rule} decides on the judge's rate of {d.metric}, not on what people would say "
                         f"(no labels on this run: oloproof label plan {outcome.run_id})")
    return out + ([""] + lines if lines else [])
