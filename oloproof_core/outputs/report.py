"""Plain-text rendering: box-drawn tables whose │-separated rows are the output contract."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from oloproof_core.statistics.display import cells_like, fixed
from oloproof_core.statistics.display import pct, table, usage_line


def render_run(outcome: Any, min_slice_support: int, slices: bool = True, quiet: bool = False) -> list[str]:
    """The documented layout of ``oloproof run``.

    :param slices: False (``--no-slices``): one line in place of the slice table.
    :param quiet: ``--quiet``: the run's line, the gate and its rules, and what produced no output.
    """
    out = [f"Run {outcome.run_id} [{outcome.state}]"]
    traces = outcome.header.get("traces")
    if traces:  # a traced run: where spans were received, and how many were filed or ignored
        out.append(f"Traces: {traces.get('receiver', 'otlp')} receiver on {traces.get('endpoint')}; "
                   f"{traces.get('spans', 0)} spans filed under {traces.get('cases', 0)} cases, "
                   f"{traces.get('ignored', 0)} ignored (no Oloproof trace id)")
    confidence = outcome.header.get("confidence_level", 0.95)
    if outcome.state.startswith("UNMEASURED"):
        out.append("Nothing was measured: no case has an observed judgment (see Missing: below), so no rule "
                   "can pass")
    if outcome.gate is not None:
        out.append(f"Gate: {outcome.gate} (exit {int(outcome.exit_code)})")
        out += table(["rule", "metric", "verdict", "reason"],
                     [[d.rule, d.metric, d.verdict, d.reason] for d in outcome.decisions])
    elif outcome.state.startswith("UNDECIDED"):
        out.append(f"Gate: UNDECIDED (the run was interrupted; exit {int(outcome.exit_code)})")
    else:
        out.append("Gate: none (no policy; exit 0)")
    sequential = outcome.header.get("sequential")
    if sequential:
        out.append(sequential_line(sequential))
    if outcome.header.get("selection"):
        out.append(subset_line(outcome.header["selection"], outcome.gate is not None))
    missing = outcome.tally.no_output
    if quiet:
        return out + (missing_line(missing, outcome.tally.cases) if missing else [])
    out.append("")
    out += table(["metric", "estimate", f"{pct(confidence)} interval", "counts"],
                 [[name, *s.cells] for name, s in outcome.summaries.items()])
    out += unit_lines(outcome.units, outcome.header.get("design"), confidence)
    from oloproof_core.outputs.human import human_lines

    out += human_lines(outcome, confidence)
    if missing:  # say so plainly: a dead service must not read like a small suite
        out += missing_line(missing, outcome.tally.cases)
    out += missing_judgment_lines(outcome)
    out += excluded_lines(outcome)
    out += same_failure_lines(outcome)
    for name in outcome.tally.empty_slices:
        out += ["", f"Slice {name}: no case has a value for it (check the field name)"]
    if outcome.slices and not slices:
        out += ["", f"Slices: {len(outcome.slices)} rows not shown (--no-slices); `oloproof view` shows them "
                    "on the run's page"]
    elif outcome.slices:
        unit = "; positions count chunks" if outcome.header.get("relevance_unit") == "chunk" else ""
        out += ["", f"Slices (exploratory, never gate; no interval below {min_slice_support} observed{unit})"]
        rows = []
        for slice_name, group, criterion, s in outcome.slices:
            cells = cells_like(s, outcome.summaries[criterion].metric)
            interval = cells[1] if s.observed >= min_slice_support else "—"
            rows.append([f"{slice_name}={group}", criterion, cells[0], interval, cells[2]])
        out += table(["slice", "metric", "estimate", "interval", "counts"], rows)
    out.append("")
    out.append(cache_line(outcome.caches))
    if "reused" in outcome.caches:
        out.append(reused_line(outcome.caches["reused"], outcome.caches["execution"]))
    for criterion, spent in outcome.caches.get("usage", {}).items():
        out.append(usage_line(criterion, spent))
    if "stages" in outcome.caches:
        out.append("Stages: " + "; ".join(f"{name} {hit} hit/{miss} miss"
                                          for name, (hit, miss) in outcome.caches["stages"].items()))
    return out


def missing_line(missing: Any, cases: int) -> list[str]:
    """``Missing: 13 of 13 cases produced no output: ...`` (the three commonest reasons)."""
    reasons = "; ".join(f"{reason} ({n})" for reason, n in missing.most_common(3))
    more = f"; {len(missing) - 3} more reasons" if len(missing) > 3 else ""
    return ["", f"Missing: {sum(missing.values())} of {cases} cases produced no output: {reasons}{more}"]


def unit_lines(units: dict, design: dict | None, confidence: float) -> list[str]:
    """The lines of a run with trials or clusters: how it was counted, the unstable cases of each
    pass/fail criterion (``Unstable: 4 of 40 cases changed verdict across 3 trials ...``), and the
    clusters over the size limit."""
    if not design:
        return []
    from oloproof_core.statistics.display import percent, percent_bounds

    out = [""]
    clusters = units.get("clusters")
    if clusters:
        how = ("every estimate is case-weighted (each case counts once), its interval over clusters"
               if design.get("estimand") == "cases" else "every estimate and interval is over cluster means")
        out.append(f"Clusters: {clusters['cases']} cases in {clusters['clusters']} clusters by {design['cluster']}; {how}")
        large = clusters["large"]
        if large:
            shown = ", ".join(f"{c['cluster']} ({c['cases']})" for c in large[:5])
            more = f", {len(large) - 5} more" if len(large) > 5 else ""
            out.append(f"Large clusters: {len(large)} of {clusters['clusters']} hold more than "
                       f"{clusters['limit']} cases: {shown}{more}")
    conversations = units.get("conversations")
    if conversations:  # for each conversation criterion, the turn each failing conversation first failed at
        for name, counts in conversations["first_failing_turn"].items():
            failed = sum(counts.values())
            shown = ", ".join(f"turn {k} ({n})" for k, n in counts.items()) or "none"
            out.append(f"First failing turn: {name}: {shown}; {failed} of {conversations['conversations']} "
                       "conversations failed")
    if design["trials"] > 1:
        out.append(f"Trials: every case ran {design['trials']} times; a case's value is its mean over its trials, "
                   "pass_all_k passes a case only if every trial passed")
    for criterion, u in units.get("instability", {}).items():
        out.append(f"Unstable: {u['unstable']} of {u['cases']} cases changed verdict across {u['trials']} trials "
                   f"({criterion}): {percent(u['unstable'] / u['cases'])} {percent_bounds(u['low'], u['high'])} "
                   f"at {pct(confidence)}")
    return out


def _reason_lines(outcome: Any, status: str, line: str) -> list[str]:
    """One line a criterion with judgments of ``status`` on cases that ran, their reasons counted;
    ``line`` is formatted with criterion, count, ran and reasons."""
    lines = []
    for criterion in outcome.summaries:
        reasons = outcome.tally.reasons[criterion][status].copy()
        reasons.pop("judged_on_last_turn", None)  # a conversation's criterion, by design (conversations.py)
        if reasons:
            shown = "; ".join(f"{reason} ({n})" for reason, n in reasons.most_common(3))
            more = f"; {len(reasons) - 3} more reasons" if len(reasons) > 3 else ""
            lines += ["", line.format(criterion=criterion, count=sum(reasons.values()), ran=outcome.tally.ran,
                                      reasons=shown + more)]
    return lines


def missing_judgment_lines(outcome: Any) -> list[str]:
    """``Missing: hit_rate_at_2 has no judgment for 2 of 13 cases that ran: no_retrieval_recorded (2)``,
    one line a criterion: judgments missing on cases that produced an output."""
    return _reason_lines(outcome, "missing", "Missing: {criterion} has no judgment for {count} of {ran} cases "
                                             "that ran: {reasons}")


def excluded_lines(outcome: Any) -> list[str]:
    """``Excluded: hit_rate_at_2 leaves out 2 of 15 cases that ran: no_relevance_labels (2)``, one line a
    criterion: cases outside a criterion leave its denominator, and the run says why."""
    return _reason_lines(outcome, "excluded", "Excluded: {criterion} leaves out {count} of {ran} cases that ran: "
                                              "{reasons}")


def same_failure_lines(outcome: Any) -> list[str]:
    """One line for a criterion whose every observed judgment (two or more) failed for one and the
    same reason: a structural mistake (the output lacks the field the evaluator reads) far more
    often than a system that is wrong every time."""
    lines = []
    for criterion in outcome.summaries:
        same = outcome.tally.same[criterion]
        reason = same.reason
        if reason is None or criterion.endswith(" (all turns)"):  # its reason is the turn: the First failing turn: line
            continue
        n, fields = same.judged, set(same.fields)
        line = f"Failed: every {criterion} judgment ({n} of {n}) failed with {reason}"
        if reason == "field_absent" and len(fields) == 1:
            field = json.loads(fields.pop())
            line += (f": no output has the field {field!r}; fix: return an object with {field!r} from the system, "
                     f"or set the evaluator's field: to the key that holds the answer")
        elif reason == "field_absent":
            line += ": no output has the field the evaluator reads; fix: check the evaluator's field: option"
        else:
            line += "; check the evaluator's options against what the system returns (oloproof inspect latest --failures)"
        lines += ["", line]
    return lines


def subset_line(record: dict, gated: bool) -> str:
    """``Subset: 10 of 40 cases (--limit 10); the gate judged a subset``: a run of selected cases."""
    return (f"Subset: {record['selected']} of {record['of']} cases ({record['flags']}); "
            + ("the gate judged a subset" if gated else "not a full run"))


def sequential_line(record: dict) -> str:
    """``Sequential: stopped when the gate was decided, after 40 of 200 cases ...``."""
    calls = record["judge_calls_not_made"]
    how = {"gate_decided": "stopped when the gate was decided", "all_cases_run": "ran every case",
           "interrupted": "interrupted"}[record["stopped"]]
    return (f"Sequential: {how}, after {record['cases_run']} of {record['cases_total']} cases "
            f"(seed {record['seed']}, batches of {record['batch']}, {record['looks']} "
            f"look{'' if record['looks'] == 1 else 's'}); {record['cases_not_run']} cases and up to {calls} judge "
            f"call{'' if calls == 1 else 's'} not made; intervals are {SEQUENCE_WORDS[record.get('interval', 'betting')]}")


SEQUENCE_WORDS = {"betting": "betting confidence sequences, valid at every look",
                  "adaptive-betting": "variance-adaptive betting confidence sequences, valid at every look",
                  "beta-binomial": "beta-binomial mixture confidence sequences (betting for scores), valid at every "
                                   "look",
                  "group-sequential": "group-sequential, alpha spent over the planned looks (betting for scores), "
                                      "valid at every look"}


def cache_line(caches: dict) -> str:
    (eh, em), (jh, jm) = caches["execution"], caches["judgment"]
    return f"Cache: execution {eh} hit/{em} miss; judgment {jh} hit/{jm} miss"


def reused_line(reused: dict, figures: list) -> str:
    """An opaque system's executions that came from the cache, and the runs that recorded them."""
    runs = ", ".join(f"{run} ({n})" for run, n in sorted(reused.items(), key=lambda item: (-item[1], item[0])))
    total = figures[0] + figures[1]
    return (f"Reused: {figures[0]} of {total} executions were recorded by earlier runs and not sent to the "
            f"system (system.cache: reuse): {runs}")


def short_json(value: Any, width: int = 160) -> str:
    """JSON on one line, cut to ``width`` characters with an ellipsis."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def judgment_word(j: dict) -> str:
    status = j["status"]
    if status == "pass":
        return "passed"
    if status == "fail":
        return "failed"
    if status == "score":
        return f"score {fixed(j['value'], 3)}"
    return f"{status} ({j.get('reason')})"


def is_failure(record: dict) -> bool:
    return "missing" in record or any(j["status"] in ("fail", "missing") for j in record["judgments"].values())


def failure_kind(record: dict) -> str:
    """``failed`` (a judgment failed), ``errored`` (no output: an error, a timeout, an interrupt)
    or ``not judged`` (an output, and a judgment missing)."""
    if "missing" in record:
        return "errored"
    if any(j["status"] == "fail" for j in record["judgments"].values()):
        return "failed"
    return "not judged"


KINDS = {"failed": "Failed: a judgment failed",
         "errored": "Errored or did not finish: no output to judge",
         "not judged": "Not judged: an output, but a judgment is missing"}


def render_failures(records: Iterable[dict]) -> Iterator[str]:
    """The ``inspect --failures`` listing, streamed: one pass over ``records`` (a run's, in case
    order) keeps the counts and spools each section's lines, which follow the head line."""
    from oloproof_core.config.files import Spool

    total, counts = 0, Counter()
    sections, why = {kind: Spool() for kind in KINDS}, Spool()
    for r in records:
        total += 1
        if not is_failure(r):
            continue
        kind = failure_kind(r)
        counts[kind] += 1
        sections[kind].write(map(printable, failure_lines(r)))
        why.write(map(printable, why_lines([r])))
    failed = sum(counts.values())
    head = f"{failed} of {total} cases failed, errored or did not finish"
    separate = bool(counts["errored"] or counts["not judged"])
    if separate:  # only failures: the documented listing; otherwise one section a kind
        head += ": " + ", ".join(f"{counts[kind]} {kind}" for kind in KINDS if counts[kind])
    yield printable(head)
    for kind, lines in sections.items():
        if separate and counts[kind]:
            yield from ["", printable(f"{KINDS[kind]} ({counts[kind]})")]
        yield from lines
    if failed:
        yield from ["", "Why: each case's expected value, and the reason each criterion gives"]
        yield from why
    else:
        list(why)  # closes it


def failure_lines(r: dict) -> list[str]:
    """One failed case in the listing: its id, why it has no output or what it output, and its failed
    or missing judgments."""
    out = ["", r["id"]]
    if "missing" in r:
        out.append(f"  missing: {r['missing']}")
    else:
        out.append(f"  output: {short_json(r['output'])}")
    for name, j in r["judgments"].items():
        if j["status"] in ("fail", "missing"):
            out.append(f"  {name}: {judgment_word(j)}")
    return out


def why_lines(failed: list[dict]) -> list[str]:
    """The expected value of each failed case and each failed or missing criterion's reason, with
    what the evaluator looked for (``detail.field``, ``detail.expected``) when it says."""
    out = []
    for r in failed:
        out += ["", r["id"], f"  expected: {short_json(r['case']['expected'])}"]
        for name, j in r["judgments"].items():
            if j["status"] not in ("fail", "missing"):
                continue
            detail = j.get("detail") or {}
            reason = j.get("reason") or ""
            rationale = detail.get("rationale")
            if isinstance(rationale, str) and rationale.strip():  # a judge's verdict: say it is one
                prompt = f", prompt {detail['prompt_version']}" if detail.get("prompt_version") else ""
                reason += f"{'; ' if reason else ''}the LLM judge's rationale{prompt}: {rationale.strip()}"
            line = f"  {name}: {'failed' if j['status'] == 'fail' else 'missing'}, " + (
                reason or "no reason given by the evaluator")
            if j.get("reason") == "field_absent" and "field" in detail:
                line += f" (the output has no field {detail['field']!r})"
            elif "expected" in detail:
                where = "the output" if detail.get("field") is None else f"output.{detail['field']}"
                line += f" (looked for {short_json(detail['expected'], 100)} in {where})"
            out.append(line)
    return out


_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with terminal control characters (C0 but tab, DEL, C1) escaped: a stored output or a
    judge's rationale may carry escape sequences that would move the cursor or recolour the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


