"""The results as data: one plain, versioned dict for a run and one for a comparison.

Every renderer (JUnit XML, JSON, Markdown, the comparison's text) reads these dicts, never the
engine's objects, so a CI file says exactly what the terminal says. The JSON document is the view
itself; its schema is ``schema/results-v1.json`` beside this module (docs/gates-in-ci.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

VERSION = 1
RUN_FORMAT = "oloproof.run"
COMPARISON_FORMAT = "oloproof.comparison"
THRESHOLD_KEYS = ("min", "max", "max_failures", "margin")


def outcome_of(verdict: str | None, block_on: Sequence[str]) -> str:
    """How a CI reads a rule: ``passed``; ``failed`` when its verdict blocks; ``skipped`` when it
    does not; ``undecided`` when the run was interrupted before any rule was decided."""
    if verdict is None:
        return "undecided"
    if verdict == "PASS":
        return "passed"
    return "failed" if verdict in block_on else "skipped"


def counts_of(pair: Sequence[int] | Mapping[str, int]) -> dict[str, int]:
    if isinstance(pair, Mapping):
        return {"hits": int(pair["hits"]), "misses": int(pair["misses"])}
    return {"hits": int(pair[0]), "misses": int(pair[1])}


def caches_of(caches: Mapping[str, Any]) -> dict:
    """The cache figures as named counts: ``{"execution": {"hits": 0, "misses": 13}, ...}``."""
    out: dict[str, Any] = {}
    for name in ("execution", "judgment"):
        if name in caches:
            out[name] = counts_of(caches[name])
    if caches.get("stages"):
        out["stages"] = {stage: counts_of(pair) for stage, pair in caches["stages"].items()}
    if caches.get("usage"):
        out["usage"] = {criterion: dict(spent) for criterion, spent in caches["usage"].items()}
    return out


def _threshold(rule: Mapping[str, Any]) -> dict:
    return {k: rule[k] for k in THRESHOLD_KEYS if rule.get(k) is not None}


def describe_rule(rule: Mapping[str, Any]) -> str:
    """``interval, min 70.0%``, ``observed_count, max_failures 0`` or ``non-inferiority, margin 5.0
    points``: a run or compare rule as the docs write it."""
    from oloproof_core.statistics.display import fixed, percent

    def bound(k: str) -> str:
        if k in ("min", "max"):
            return f"{k} {percent(rule[k])}"
        return f"margin {fixed(rule[k], 1)} points" if k == "margin" else f"{k} {rule[k]}"

    return ", ".join([rule["kind"], *(bound(k) for k in THRESHOLD_KEYS if rule.get(k) is not None)])


def decision_entry(rule: Mapping[str, Any], verdict: str | None, reason: str, block_on: Sequence[str],
                   compared: bool = False, plan: Mapping[str, Any] | None = None) -> dict:
    """One rule's decision as the views list it: a run's, or with ``compared`` a comparison's,
    which adds its ``planning`` line (compare.plan's figures in words, or None)."""
    entry = {"rule": rule["id"], "metric": rule["metric"], "kind": rule["kind"], "threshold": _threshold(rule),
             "description": describe_rule(rule), "verdict": verdict, "reason": reason,
             "blocking": verdict in block_on, "outcome": outcome_of(verdict, block_on)}
    if compared:
        from oloproof_core.results.view import planning_line

        entry = {**entry, "planning": planning_line(plan) if plan else None}
        if plan and plan.get("power"):
            entry["power"] = power_entry(plan["paired"], plan["power"])
    return entry


def power_entry(paired: int, power: Mapping[str, Any]) -> dict:
    """The power-based planning figures of an undecided compare rule (statistics/power.py), with its line:
    ``about 212 paired cases would decide it 80% of the time if the difference holds (at up to 19%
    discordance)``. Only the JSON and Markdown views show it: the terminal's lines are the documented ones."""
    percent = round(100 * power["power"])
    discordance = int(round(100 * power["discordance"]))
    if power["total"] is None:
        line = (f"no total up to {power['limit']:,} paired cases would decide it {percent}% of the time, "
                f"if the difference holds (at up to {discordance}% discordance)")
    else:
        line = (f"about {power['total']} paired cases would decide it {percent}% of the time if the difference "
                f"holds (at up to {discordance}% discordance)")
    return {"total": power["total"], "more": None if power["total"] is None else power["total"] - paired,
            "power": power["power"], "difference": power["difference"], "discordance": power["discordance"],
            "discordance_level": power["discordance_level"], "line": line}


def _system(header: Mapping[str, Any]) -> dict:
    from oloproof_core.model.identity import digest

    system = header["system"]
    return {"name": system["name"], "version": str(system["version"]), "kind": system.get("kind"),
            "config": digest(system.get("identity"))[:8]}


def run_ref(header: Mapping[str, Any]) -> dict:
    ref = {"id": header["id"], "created": header["created"], "state": header["state"], "system": _system(header),
           "config": header.get("config"), "cases": int(header["cases"])}
    if header.get("parent"):
        ref["parent"], ref["role"] = header["parent"], header.get("role")
    if header.get("selection"):  # a subset of the suite's cases (run --limit, --filter, --sample)
        ref["selection"] = header["selection"]
    return ref


def _metric(name: str, m: Mapping[str, Any]) -> dict:
    successes = None
    if m.get("metric") == "proportion" and m.get("value") is not None:
        successes = int(round(m["value"] * m["observed"]))
    estimate, interval, counts = m["cells"]
    return {"name": name, "metric": m.get("metric"), "estimate": m.get("value"), "low": m.get("low"),
            "high": m.get("high"), "observed": m["observed"], "successes": successes, "missing": m["missing"],
            "excluded": m["excluded"], "judged": m.get("judged", 0),
            "display": {"estimate": estimate, "interval": interval, "counts": counts}}


def _missing(records: Iterable[Mapping[str, Any]], conversations: dict | None = None) -> dict:
    """The missing cases' reasons; ``conversations`` (conversation -> its entry) gathers the turns."""
    reasons: Counter = Counter()
    for r in records:
        if "missing" in r:
            reasons[r["missing"]] += 1
        if conversations is None:
            continue
        metadata = r.get("case", {}).get("metadata", {})  # a plain case is a conversation of its own
        turn = isinstance(metadata.get("turn"), int) and metadata.get("conversation")
        key = turn or r["id"]
        entry = conversations.setdefault(key, {"id": key, "turns": []})
        entry["turns"].append(r["id"])
        entry["verdicts"] = {name: j["status"] for name, j in r["judgments"].items()  # its last turn's
                             if name.endswith(" (all turns)")}
    return {"cases": sum(reasons.values()),
            "reasons": [{"reason": reason, "cases": n} for reason, n in reasons.most_common()]}


def run_view(header: Mapping[str, Any], summary: Mapping[str, Any], records: Iterable[Mapping[str, Any]]) -> dict:
    """A stored run (its header, summary and case records) as the ``oloproof.run`` document.

    :param records: read once, in one pass that counts the missing cases' reasons (a store's
        ``run_cases`` streams them)."""
    policy = summary.get("policy")
    block_on = list(policy["block_on"]) if policy else []
    metrics = {name: _metric(name, m) for name, m in summary["metrics"].items()}
    decided = {d["rule"]: d for d in summary.get("decisions", [])}
    decisions = []
    for rule in policy["rules"] if policy else []:
        d = decided.get(rule["id"])
        verdict = d["verdict"] if d else None
        decisions.append(decision_entry(rule, verdict, d["reason"] if d else "run_interrupted", block_on))
    if summary["state"].startswith("UNDECIDED"):
        verdict = "UNDECIDED"
    else:
        verdict = summary.get("gate")  # None: no policy
    document = {
        "format": RUN_FORMAT, "version": VERSION,
        "run": run_ref(header),
        "confidence_level": header.get("confidence_level", 0.95),
        "gate": {"verdict": verdict, "exit_code": int(summary["exit_code"]), "block_on": block_on,
                 "policy": policy is not None},
        "decisions": decisions,
        "metrics": list(metrics.values()),
        "missing": _missing(records, conversations := {} if "conversations" in summary else None),
        "caches": caches_of(summary.get("caches", {})),
        "exit_code": int(summary["exit_code"]),
    }
    design = header.get("design")
    if design:  # trials or clusters: how the run counted, the unstable cases, the clusters
        units: dict = {"trials": design["trials"], "cluster": design["cluster"]}
        if design.get("cluster"):  # what the estimate is: the mean of cluster means, or case-weighted
            units["estimand"] = design.get("estimand", "cluster-means")
        if "instability" in summary:
            units["instability"] = [{"criterion": name, **found} for name, found in summary["instability"].items()]
        if "clusters" in summary:
            units["clusters"] = summary["clusters"]
        if "conversations" in summary:  # conversations: the turn each failing one first failed at
            units["conversations"] = summary["conversations"]
        document["units"] = units
    if conversations:  # each conversation's turn cases, and its verdict of each conversation criterion
        document["conversations"] = list(conversations.values())
    return document


def case_criteria(records: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, str, dict, str | None, str | None]]:
    """Every case x criterion of a run: (case id, criterion, judgment, the case's missing reason, its
    conversation: None but for a conversation's turn). A conversation criterion on a turn but the
    last (excluded, ``judged_on_last_turn``) is left out."""
    for record in records:
        metadata = (record.get("case") or {}).get("metadata") or {}
        conversation = metadata.get("conversation") if isinstance(metadata.get("turn"), int) else None
        for criterion, judgment in record["judgments"].items():
            if conversation is None or judgment.get("reason") != "judged_on_last_turn":
                yield record["id"], criterion, judgment, record.get("missing"), conversation


def paired_entry(p: Any, confidence: float, interval: bool = True) -> dict:
    """One criterion's paired difference (a compare.Paired) as the comparison view's ``metrics``
    (and ``slices``) entry.

    :param interval: False leaves the interval out (a slice with too few pairs for one).
    """
    from oloproof_core.statistics.display import points_cells

    entry: dict = {"name": p.criterion, "paired": p.n, "difference": None, "low": None, "high": None,
                   "missing": p.n_missing, "excluded": sum(p.excluded.values()), "display": None}
    if p.unit != "cases":  # cluster means paired: the entry says what a pair is
        entry["unit"] = p.unit
    if p.n:
        diff, low, high = p.interval(confidence)
        value, bounds = points_cells(diff, low, high)
        entry.update(difference=diff, display={"difference": value, "interval": bounds if interval else None})
        if interval:
            entry.update(low=low, high=high)
    entry["excluded_reasons"] = [{"reason": reason, "pairs": n} for reason, n in sorted(p.excluded.items())]
    entry["missing_reasons"] = [{"reason": reason, "run": where, "pairs": n}
                                for (reason, where), n in sorted(p.missing.items())]
    return entry


def change_of(entry: Mapping[str, str]) -> str:
    """A changed case's direction: ``fixed`` (it passes now), ``broken`` (it passed before) or
    ``changed`` (between failed and missing)."""
    if entry["candidate"] == "pass":
        return "fixed"
    return "broken" if entry["baseline"] == "pass" else "changed"


def changed_cases(candidate: Mapping[str, Mapping], baseline: Mapping[str, Mapping], ids: Sequence[str],
                  criteria: Sequence[str]) -> list[dict]:
    """The paired cases whose verdict on a criterion changed: passed, failed or missing, either way."""
    return [entry for case_id in ids for entry in case_changes(candidate[case_id], baseline[case_id], criteria)]


def case_changes(candidate: Mapping[str, Any], baseline: Mapping[str, Any], criteria: Sequence[str]) -> list[dict]:
    """One paired case's changed verdicts (its two records), as :func:`changed_cases` lists them."""
    verdicts = ("pass", "fail", "missing")
    out = []
    for criterion in criteria:
        x = candidate["judgments"].get(criterion)
        y = baseline["judgments"].get(criterion)
        if x and y and x["status"] != y["status"] and x["status"] in verdicts and y["status"] in verdicts:
            out.append({"case": candidate["id"], "criterion": criterion, "baseline": y["status"],
                        "candidate": x["status"]})
    return out


def planning_line(plan: Mapping[str, Any]) -> str:
    """compare.plan's figures: ``about 38 more paired cases would decide it, if the difference holds
    (53 in total at 7% discordance)``."""
    if plan.get("graded"):  # trial means, cluster means: the differences scaled, not a discordance
        noun = "paired clusters" if plan.get("unit") == "clusters" else "paired cases"
        if plan["total"] is None:
            return f"no total up to {plan['limit']:,} {noun} would decide it, if the differences hold"
        return f"about {plan['total'] - plan['paired']} more {noun} would decide it, if the differences hold " \
               f"({plan['total']} in total)"
    if plan["total"] is None:
        return (f"no total up to {plan['limit']:,} paired cases would decide it, "
                f"if the difference holds ({plan['discordance']}% discordance)")
    return (f"about {plan['total'] - plan['paired']} more paired cases would decide it, if the difference holds "
            f"({plan['total']} in total at {plan['discordance']}% discordance)")
