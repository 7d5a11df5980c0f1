"""Plain-text rendering: box-drawn tables whose │-separated rows are the output contract."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A box-drawn table; every cell padded to its column's width."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * (w + 2) for w in widths) + right

    def row(cells: Sequence[str]) -> str:
        return "│ " + " │ ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " │"

    return [line("┌", "┬", "┐"), row(header), line("├", "┼", "┤"), *map(row, rows), line("└", "┴", "┘")]


def pct(confidence: float) -> str:
    return f"{100 * confidence:g}%"


def render_run(outcome: Any, min_slice_support: int) -> list[str]:
    """The documented layout of ``oloproof run``."""
    out = [f"Run {outcome.run_id} [{outcome.state}]"]
    confidence = outcome.header.get("confidence_level", 0.95)
    if outcome.gate is not None:
        out.append(f"Gate: {outcome.gate} (exit {int(outcome.exit_code)})")
        out += table(["rule", "metric", "verdict", "reason"],
                     [[d.rule, d.metric, d.verdict, d.reason] for d in outcome.decisions])
    elif outcome.state.startswith("UNDECIDED"):
        out.append(f"Gate: UNDECIDED (the run was interrupted; exit {int(outcome.exit_code)})")
    else:
        out.append("Gate: none (no policy; exit 0)")
    out.append("")
    out += table(["metric", "estimate", f"{pct(confidence)} interval", "counts"],
                 [[name, *s.cells] for name, s in outcome.summaries.items()])
    missing = Counter("interrupted" if r.execution is None else r.execution.missing for r in outcome.results
                      if r.execution is None or r.execution.missing is not None)
    if missing:  # say so plainly: a dead service must not read like a small suite
        reasons = "; ".join(f"{reason} ({n})" for reason, n in missing.most_common(3))
        more = f"; {len(missing) - 3} more reasons" if len(missing) > 3 else ""
        out += ["", f"Missing: {sum(missing.values())} of {len(outcome.results)} cases produced no output: "
                    f"{reasons}{more}"]
    for name in outcome.empty_slices:
        out += ["", f"Slice {name}: no case has a value for it (check the field name)"]
    if outcome.slices:
        out += ["", f"Slices (exploratory, never gate; no interval below {min_slice_support} observed)"]
        rows = []
        for slice_name, group, criterion, s in outcome.slices:
            interval = s.cells[1] if s.observed >= min_slice_support else "—"
            rows.append([f"{slice_name}={group}", criterion, s.cells[0], interval, s.cells[2]])
        out += table(["slice", "metric", "estimate", "interval", "counts"], rows)
    out.append("")
    out.append(cache_line(outcome.caches))
    for criterion, spent in outcome.caches.get("usage", {}).items():
        out.append(usage_line(criterion, spent))
    if "stages" in outcome.caches:
        out.append("Stages: " + "; ".join(f"{name} {hit} hit/{miss} miss"
                                          for name, (hit, miss) in outcome.caches["stages"].items()))
    return out


def cache_line(caches: dict) -> str:
    (eh, em), (jh, jm) = caches["execution"], caches["judgment"]
    return f"Cache: execution {eh} hit/{em} miss; judgment {jh} hit/{jm} miss"


def usage_line(criterion: str, spent: dict) -> str:
    """``Usage: groundedness 13 calls · 5,120 input tokens · 260 output tokens · $0.0123``."""
    calls = spent.get("calls", 0)
    parts = [f"{calls} call" + ("" if calls == 1 else "s")]
    for key, label in (("input_tokens", "input tokens"), ("output_tokens", "output tokens")):
        if key in spent:
            parts.append(f"{int(spent[key]):,} {label}")
    if "cost" in spent:
        parts.append(f"${spent['cost']:.4f}")
    return f"Usage: {criterion} " + " · ".join(parts)


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
        return f"score {j['value']:.3f}"
    return f"{status} ({j.get('reason')})"


def is_failure(record: dict) -> bool:
    return "missing" in record or any(j["status"] in ("fail", "missing") for j in record["judgments"].values())


def render_failures(records: list[dict]) -> list[str]:
    failed = [r for r in records if is_failure(r)]
    out = [f"{len(failed)} of {len(records)} cases failed, errored or did not finish"]
    for r in failed:
        out += ["", r["id"]]
        if "missing" in r:
            out.append(f"  missing: {r['missing']}")
        else:
            out.append(f"  output: {short_json(r['output'])}")
        for name, j in r["judgments"].items():
            if j["status"] in ("fail", "missing"):
                out.append(f"  {name}: {judgment_word(j)}")
    return [printable(line) for line in out]


_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with terminal control characters (C0 but tab, DEL, C1) escaped: a stored output or a
    judge's rationale may carry escape sequences that would move the cursor or recolour the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def render_case(record: dict) -> list[str]:
    """What ``inspect --case`` prints, every stored text made printable."""
    return [printable(line) for line in _case_lines(record)]


def _case_lines(record: dict) -> list[str]:
    case = record["case"]
    out = [record["id"], f"  input: {json.dumps(case['input'], ensure_ascii=False)}",
           f"  expected: {json.dumps(case['expected'], ensure_ascii=False)}"]
    if case.get("metadata"):
        out.append(f"  metadata: {json.dumps(case['metadata'], ensure_ascii=False)}")
    if "missing" in record:
        out.append(f"  missing: {record['missing']}")
    else:
        out.append(f"  output: {json.dumps(record['output'], ensure_ascii=False)}")
    for kind, items in record.get("artifacts", {}).items():
        for item in items:
            out.append(f"  {kind}: {json.dumps(item, ensure_ascii=False, sort_keys=True)}")
    out.append("  judgments:")
    for name, j in record["judgments"].items():
        out.append(f"    {name}: {judgment_word(j)}" + (f" ({j['reason']})" if j.get("reason") and j["status"]
                                                         in ("pass", "fail") else ""))
        detail = j.get("detail") or {}
        if detail.get("rationale"):
            out.append(f"      rationale: {detail['rationale']}")
        if detail.get("raw") is not None:
            out.append(f"      raw reply: {short_json(detail['raw'])}")
    return out
