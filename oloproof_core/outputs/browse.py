"""What the viewer adds for browsing results day to day: the run page's failures, the runs list's
identities, headline metrics and differing settings, and two runs side by side.

Plain data, as in :mod:`oloproof_core.outputs.pages`. The run page's search, filters and sorts
are the store's (``query_cases``, :mod:`oloproof_core.storage.query`), never a scan here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from oloproof_core.outputs.pages import dump_text, status_of

FAILURES_SHOWN = 20
def gating_criteria(document: dict, criteria: list[str]) -> list[str]:
    """The criteria the gate's rules decide on (every criterion when the run has no rules)."""
    gated = [d["metric"] for d in document.get("decisions", []) if d.get("metric") in criteria]
    return list(dict.fromkeys(gated)) or list(criteria)


def failures(records: list[dict], criteria: list[str]) -> dict:
    """The cases failing (or missing) a gating criterion, in the run's order: the first
    ``FAILURES_SHOWN`` with what failed and why, and how many there are."""
    rows, count = [], 0
    for record in records:
        judgments = record.get("judgments") or {}
        failed = [c for c in criteria if c in judgments and status_of(judgments[c]) in ("failed", "missing")]
        if not failed and "missing" not in record:
            continue
        count += 1
        if len(rows) < FAILURES_SHOWN:
            first = judgments.get(failed[0]) if failed else None
            reason = record.get("missing") or (first or {}).get("reason") or (
                ((first or {}).get("detail") or {}).get("rationale")) or ""
            rows.append({"id": record["id"], "criteria": failed, "reason": str(reason)})
    return {"rows": rows, "count": count, "criteria": criteria}


def config_hash(header: dict) -> str:
    """What the run was configured to be (the system's identity and every evaluator's), as 8 hex."""
    identity = {"system": header.get("system", {}).get("identity"), "evaluators": header.get("evaluators")}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _settings(header: dict) -> dict[str, str]:
    """The system's settings and each evaluator's options as ``name: value``; code and packages as
    one ``code`` digest."""
    identity = dict(header.get("system", {}).get("identity") or {})
    code = {k: identity.pop(k) for k in ("code", "project") if k in identity}
    out = {str(k): dump_text(v) for k, v in identity.items() if k not in ("kind", "name")}
    out["code"] = hashlib.sha256(json.dumps(code, sort_keys=True, default=str).encode()).hexdigest()[:8]
    for criterion, evaluator in (header.get("evaluators") or {}).items():
        if isinstance(evaluator, dict):
            for k, v in (evaluator.get("options") or {}).items():
                if k != "criterion":
                    out[f"{criterion}.{k}"] = dump_text(v)
    return out


def changed_settings(header: dict, previous: dict | None) -> list[str]:
    """``token_budget 40 → 120``: the settings that differ from the previous run of the same suite."""
    if previous is None:
        return []
    now, before = _settings(header), _settings(previous)
    return [f"{k} {before.get(k, '—')} → {now.get(k, '—')}" for k in sorted({*now, *before})
            if now.get(k) != before.get(k)]


def headline(summary: dict, header: dict) -> str:
    """The first gated metric's estimate and interval (the first metric's when no rule gates)."""
    metrics = summary.get("metrics") or {}
    gated = [d.get("metric") for d in summary.get("decisions") or [] if d.get("metric") in metrics]
    name = (gated or list(metrics) or [None])[0]
    if name is None:
        return ""
    cells = metrics[name].get("cells") or []
    return f"{name} {' '.join(cells[:2])}".strip()


def runs_rows(headers: list[dict], summaries: dict) -> dict[str, dict]:
    """Per run id: its config hash, headline metric, the settings changed since the previous run
    of the same suite (system name and config file; diagnosis child runs are not compared), and
    its diagnosis child runs."""
    out: dict[str, dict] = {}
    last: dict[tuple, dict] = {}
    for header in headers:  # oldest first
        suite = (header["system"]["name"], header.get("config"))
        changed = [] if header.get("parent") else changed_settings(header, last.get(suite))
        out[header["id"]] = {"hash": config_hash(header), "changed": changed, "children": [],
                             "headline": headline(summaries[header["id"]], header)}
        if not header.get("parent"):
            last[suite] = header
    for header in headers:
        if header.get("parent") in out:
            out[header["parent"]]["children"].append({"id": header["id"], "role": header.get("role")})
    return out


def runs_view(store: Any, system: str | None = None, state: str | None = None, gate: str | None = None,
              every: bool = False) -> dict:
    """Every stored run, newest first, filtered by system name, state and gate verdict, each with
    its config hash, headline metric and the settings changed since the previous run of its suite.
    A diagnosis's child runs are folded under their parent unless ``every`` (or a state filter,
    which names what to list)."""
    rows = []
    headers = store.list_runs()
    summaries = {header["id"]: store.get_run(header["id"])[1] for header in headers}
    extra = runs_rows(headers, summaries)
    folded = not every and not state
    for header in reversed(headers):
        summary = summaries[header["id"]]
        row = {"id": header["id"], "created": header.get("created"), "system": header["system"]["name"],
               "version": header["system"]["version"], "config": header.get("config"),
               "state": summary.get("state") or header.get("state"), "gate": summary.get("gate"),
               "cases": header.get("cases"), "parent": header.get("parent"), "role": header.get("role"),
               "selection": header.get("selection"), **extra[header["id"]]}
        if system and row["system"] != system:
            continue
        if state and not (row["state"] or "").startswith(state):
            continue
        if gate and (row["gate"] or "none") != gate:
            continue
        if folded and row["parent"] in extra:
            continue
        rows.append(row)
    return {"runs": rows, "filters": {"system": system or "", "state": state or "", "gate": gate or "",
                                      "all": "1" if every else ""},
            "hidden": sum(1 for h in headers if h.get("parent") in extra) if folded else 0,
            "systems": sorted({h["system"]["name"] for h in headers}),
            "states": sorted({(summaries[h["id"]].get("state") or "") for h in headers}),
            "gates": sorted({summaries[h["id"]].get("gate") or "none" for h in headers})}


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """``old`` to ``new`` word by word: ``("same" | "del" | "ins", text)`` pieces."""
    from difflib import SequenceMatcher

    a, b = old.split(), new.split()
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out.append(("same", " ".join(a[i1:i2])))
            continue
        if i2 > i1:
            out.append(("del", " ".join(a[i1:i2])))
        if j2 > j1:
            out.append(("ins", " ".join(b[j1:j2])))
    return out


def judged(record: dict, criterion: str) -> tuple[str, str]:
    """A case's status on a criterion and what its judge said (reason, else rationale)."""
    judgment = (record.get("judgments") or {}).get(criterion)
    if not judgment:
        return "", ""
    detail = judgment.get("detail") if isinstance(judgment.get("detail"), dict) else {}
    return status_of(judgment), str(judgment.get("reason") or detail.get("rationale") or "")


def retrieved(record: dict) -> list[dict]:
    """The passages a case's last retrieval returned, in rank order: doc, chunk and score."""
    found = ((record.get("artifacts") or {}).get("retrieval/v1") or [None])[-1] or {}
    return [{"rank": rank, "doc": p.get("doc_id"), "chunk": p.get("chunk_id"), "score": p.get("score")}
            for rank, p in enumerate(found.get("candidates") or [], 1) if isinstance(p, dict)]


PAIR_SHOWN = 50
CHANGES = ("fixed", "broken", "changed", "output")


def pair_view(store: Any, records: Any, candidate: str, baseline: str, show: str | None = None) -> dict:
    """Two runs side by side: their settings, both estimates and intervals beside the paired
    difference, the stored comparisons of the pair, and each case whose verdict or output
    changed, with both outputs, a word diff and both verdicts. ``show``: only the cases ``fixed``,
    ``broken``, ``changed`` (between failed and missing) or with only their ``output`` changed."""
    from oloproof_core.outputs.pages import paired_differences
    from oloproof_core.results.view import case_changes, change_of

    (new_h, new_s), (old_h, old_s) = store.get_run(candidate), store.get_run(baseline)
    stored = [(oid, r) for oid, r in store.list_objects("comparison")
              if r.get("candidate") == candidate and r.get("baseline") == baseline]

    def build(_: list[dict]) -> dict:
        new = {r["id"]: r for r in records(candidate)}
        old = {r["id"]: r for r in records(baseline)}
        criteria = [c for c in new_h.get("evaluators", {}) if c in old_h.get("evaluators", {})]
        cases = []
        for case_id in (i for i in new if i in old):
            x, y = new[case_id], old[case_id]
            changes = case_changes(x, y, criteria)
            before, after = dump_text(y.get("output") if "missing" not in y else f"missing: {y['missing']}"), \
                dump_text(x.get("output") if "missing" not in x else f"missing: {x['missing']}")
            if not changes and before == after:
                continue
            kinds = [change_of(c) for c in changes] or ["output"]
            cases.append({"id": case_id, "change": kinds[0] if len(set(kinds)) == 1 else "changed",
                          "criteria": [f"{c['criterion']}: {c['baseline']} → {c['candidate']}" for c in changes],
                          "input": (x.get("case") or {}).get("input"), "baseline": before, "candidate": after,
                          "diff": word_diff(before, after),
                          "verdicts": [(c, *judged(y, c), *judged(x, c)) for c in criteria],
                          "retrievals": [retrieved(y), retrieved(x)]})
        policy = (stored[0][1].get("policy") if stored else None) or {}
        return {"cases": cases, "differences": paired_differences(list(new.values()), list(old.values()), policy)}

    pair = records.derived(candidate, ("pair", baseline), build)
    names = list(dict.fromkeys([*new_s.get("metrics", {}), *old_s.get("metrics", {})]))
    estimates = [{"name": n, "candidate": (new_s["metrics"].get(n) or {}).get("cells", ["", ""])[:2],
                  "baseline": (old_s["metrics"].get(n) or {}).get("cells", ["", ""])[:2]} for n in names]
    chosen = [c for c in pair["cases"] if not show or c["change"] == show]
    decisions = [d for _, r in stored[:1] for d in (r.get("view") or {}).get("decisions", [])]
    return {"candidate": new_h, "baseline": old_h, "gates": (new_s.get("gate"), old_s.get("gate")),
            "settings": changed_settings(new_h, old_h), "estimates": estimates,
            "differences": {d["criterion"]: d for d in pair["differences"]}, "stored": [oid for oid, _ in stored],
            "decisions": decisions, "show": show or "", "counts": {k: sum(c["change"] == k for c in pair["cases"])
                                                                  for k in CHANGES},
            "cases": chosen[:PAIR_SHOWN], "more": max(0, len(chosen) - PAIR_SHOWN)}
