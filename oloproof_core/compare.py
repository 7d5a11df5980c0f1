"""Compare two runs case by case: paired differences, decision rules, planning lines.

Cases pair by id. Per criterion, a pair counts when both judgments are observed; pairs with a
missing or excluded judgment are counted, with reasons, and never silently dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from attrs import frozen

from . import stats
from .config import Document, structure
from .display import points_cells
from .errors import ConfigError, ExitCode
from .gate import Policy, Rule, gate, load_policy
from .identity import digest

COMPARE_KINDS = ("non-inferiority", "superiority", "floor")
PLANNING_LIMIT = 100_000


@frozen(kw_only=True)
class Paired:
    """One criterion over the paired cases: the differences and what was left out, and why."""

    criterion: str
    candidate: list[float]  # observed values, pair by pair
    baseline: list[float]
    missing: Counter
    excluded: Counter
    candidate_all: list[dict]  # every candidate judgment of a paired case (for floor rules)

    @property
    def n(self) -> int:
        return len(self.candidate)

    @property
    def discordant(self) -> tuple[int, int] | None:
        """(pass→fail, fail→pass) when every value is 0 or 1, else None."""
        if not all(v in (0.0, 1.0) for v in self.candidate + self.baseline):
            return None
        b = sum(1 for x, y in zip(self.candidate, self.baseline) if y == 1.0 and x == 0.0)
        c = sum(1 for x, y in zip(self.candidate, self.baseline) if y == 0.0 and x == 1.0)
        return b, c

    def interval(self, confidence: float, impute: float | None = None) -> tuple[float, float, float]:
        """Mean difference and interval; ``impute`` adds the missing pairs at that difference."""
        extra = sum(self.missing.values()) if impute is not None else 0
        cand = self.candidate + ([max(impute, 0.0)] * extra if extra else [])
        base = self.baseline + ([max(-impute, 0.0)] * extra if extra else [])
        return stats.paired_difference(cand, base, confidence)


def pair(criterion: str, candidate: dict[str, dict], baseline: dict[str, dict], ids: Sequence[str],
         slice_filter: set[str] | None = None) -> Paired:
    cand, base, missing, excluded, cand_all = [], [], Counter(), Counter(), []
    for case_id in ids:
        if slice_filter is not None and case_id not in slice_filter:
            continue
        x, y = candidate[case_id]["judgments"].get(criterion), baseline[case_id]["judgments"].get(criterion)
        cand_all.append(x)
        if x is None or y is None:
            missing["not_judged"] += 1
        elif x["status"] == "excluded" or y["status"] == "excluded":
            excluded[(x if x["status"] == "excluded" else y).get("reason") or "excluded"] += 1
        elif x["status"] == "missing" or y["status"] == "missing":
            missing[(x if x["status"] == "missing" else y).get("reason") or "missing"] += 1
        else:
            cand.append(float(x["value"]))
            base.append(float(y["value"]))
    return Paired(criterion=criterion, candidate=cand, baseline=base, missing=missing, excluded=excluded,
                  candidate_all=cand_all)


def metric_line(p: Paired, confidence: float) -> list[str]:
    head = f"{p.criterion}: "
    if p.n:
        diff, low, high = p.interval(confidence)
        value, interval = points_cells(diff, low, high)
        head += f"{value} {interval}"
    else:
        head += "no paired observations"
    lines = [f"{head} · {p.n} paired · {sum(p.missing.values())} missing · {sum(p.excluded.values())} excluded"]
    lines += [f"  excluded {n}: {reason}" for reason, n in sorted(p.excluded.items())]
    lines += [f"  missing {n}: {reason}" for reason, n in sorted(p.missing.items())]
    return lines


@frozen(kw_only=True)
class Decision:
    rule: Rule
    verdict: str
    reason: str
    planning: str | None = None


def describe(rule: Rule) -> str:
    if rule.kind == "floor":
        return f"floor, min {100 * rule.min:.1f}%"
    return f"{rule.kind}, margin {rule.margin or 0.0:.1f} points"


def decide(rule: Rule, p: Paired, confidence: float, metric: Any, changed: bool) -> Decision:
    """One compare rule. Missing pairs never help: PASS must hold with each missing pair at the
    worst difference, FAIL with each at the best."""
    if changed:
        return Decision(rule=rule, verdict="MANUAL_REVIEW", reason="evaluator_changed")
    if rule.kind == "floor":
        from .gate import decide_rule
        from .model import Judgment

        judgments = [Judgment.from_data(j) for j in p.candidate_all if j is not None]
        d = decide_rule(Rule(id=rule.id, metric=rule.metric, min=rule.min), judgments, metric, confidence)
        return Decision(rule=rule, verdict=d.verdict, reason=d.reason)
    if p.n == 0:
        return Decision(rule=rule, verdict="INSUFFICIENT_EVIDENCE", reason="no_paired_cases")
    margin = (rule.margin or 0.0) / 100.0
    boundary = -margin if rule.kind == "non-inferiority" else margin
    _, worst_low, _ = p.interval(confidence, impute=-1.0)
    _, _, best_high = p.interval(confidence, impute=+1.0)
    if worst_low > boundary:
        return Decision(rule=rule, verdict="PASS", reason="interval_above_margin")
    if best_high < boundary:
        return Decision(rule=rule, verdict="FAIL", reason="interval_below_margin")
    _, low, high = p.interval(confidence)
    if sum(p.missing.values()) and (low > boundary or high < boundary):
        return Decision(rule=rule, verdict="INSUFFICIENT_EVIDENCE", reason="missing_cases_could_change_it")
    return Decision(rule=rule, verdict="INSUFFICIENT_EVIDENCE", reason="interval_overlaps_margin",
                    planning=planning_line(p, -boundary, confidence))


def planning_line(p: Paired, margin: float, confidence: float) -> str | None:
    """How many more pairs would decide the rule if the observed difference and discordance held."""
    counts = p.discordant
    if counts is None or sum(counts) == 0:
        return None  # scores, or no discordant pair: nothing to scale
    b, c = counts
    total = stats.planning_total(b, c, p.n, margin, confidence, limit=PLANNING_LIMIT)
    share = round(100 * (b + c) / p.n)
    if total is None:
        return (f"no total up to {PLANNING_LIMIT} paired cases would decide it, "
                f"if the difference holds ({share}% discordance)")
    return (f"about {total - p.n} more paired cases would decide it, if the difference holds "
            f"({total} in total at {share}% discordance)")


def load_compare_policy(path: Any) -> Policy:
    doc = Document.load(path)
    policy = load_policy(doc, doc.data, path.parent, ())
    for i, rule in enumerate(policy.rules):
        where = policy.where.get(rule.id)
        if rule.kind not in COMPARE_KINDS:
            raise ConfigError(f"rule {rule.id!r} has kind {rule.kind!r}, which compare does not decide",
                              where=where, fix=f"use one of: {', '.join(COMPARE_KINDS)}")
        if rule.kind == "floor" and rule.min is None:
            raise ConfigError(f"rule {rule.id!r} of kind floor needs min", where=where, fix="add `min: 0.70`")
        if rule.kind != "floor" and rule.margin is not None and not 0 <= rule.margin < 100:
            raise ConfigError(f"margin is in points, between 0 and 100, got {rule.margin}", where=where,
                              fix="write margin: 5.0 for five points")
    return policy


def compare_runs(store: Any, plugins: Any, candidate_id: str, baseline_id: str, policy: Policy,
                 show_slices: bool, allow_different: bool) -> tuple[list[str], ExitCode, str, dict]:
    """The printed comparison, its exit code, and its content id and record."""
    cand_header, _ = store.get_run(candidate_id)
    base_header, _ = store.get_run(baseline_id)
    cand = {r["id"]: r for r in store.run_cases(candidate_id)}
    base = {r["id"]: r for r in store.run_cases(baseline_id)}
    ids = [i for i in cand if i in base]
    if not ids:
        raise ConfigError(f"{candidate_id} and {baseline_id} share no case ids, so no case can be paired",
                          fix="compare two runs of the same suite")
    criteria = [c for c in cand_header["evaluators"] if c in base_header["evaluators"]]
    changed = {c for c in criteria if cand_header["evaluators"][c] != base_header["evaluators"][c]}
    if changed and not allow_different:
        raise ConfigError(f"criterion {sorted(changed)[0]!r} is defined differently in the two runs "
                          "(same name, different evaluator config)",
                          fix="compare runs of the same evaluators, or pass --allow-different-evaluators")
    for rule in policy.rules:
        if rule.metric not in criteria:
            raise ConfigError(f"rule {rule.id!r} names metric {rule.metric!r}, which the two runs do not share",
                              where=policy.where.get(rule.id), fix=f"use one of: {', '.join(criteria)}")
    confidence = policy.confidence_level
    body: list[str] = []
    only_c, only_b = [i for i in cand if i not in base], [i for i in base if i not in cand]
    if only_c or only_b:
        body.append(f"Unpaired: {len(only_c)} only in {candidate_id}, {len(only_b)} only in {baseline_id}")
    paired = {c: pair(c, cand, base, ids) for c in criteria}
    for c in criteria:
        body += metric_line(paired[c], confidence)

    slice_lines = []
    support = cand_header.get("min_slice_support", 10)
    for name in cand_header.get("slices", []):
        groups: dict[str, set[str]] = {}
        for i in ids:
            key = (cand[i].get("slices") or {}).get(name)
            if key is not None:
                groups.setdefault(key, set()).add(i)
        for key in sorted(groups):
            for c in criteria:
                p = pair(c, cand, base, ids, groups[key])
                if not p.n:
                    continue
                line = metric_line(p, confidence)[0]
                if p.n < support:  # too few pairs for an interval worth printing
                    head, _, tail = line.partition(" · ")
                    line = head.split(" [")[0] + " · " + tail
                slice_lines.append(f"  {name}={key} · {line}")
    if show_slices:
        body += ["Exploratory slice differences (never gate)", *slice_lines]
    else:
        body.append(f"{len(slice_lines)} exploratory slice differences not shown; add --slices to list them")

    metrics = {}
    for c in criteria:
        metric_name = cand_header.get("metrics", {}).get(c, "proportion")
        metrics[c] = plugins.metrics.get(metric_name).factory()
    decisions = [decide(r, paired[r.metric], confidence, metrics[r.metric], r.metric in changed)
                 for r in policy.rules]
    body.append("Decisions")
    for d in decisions:
        body.append(f"  {d.rule.id}  {d.rule.metric}  {describe(d.rule)}  {d.verdict}  {d.reason}")
        if d.planning:
            body.append(f"    {d.planning}")
    verdict, code = gate([_GateView(d.verdict) for d in decisions], policy.block_on)
    body.append(f"Gate: {verdict} (exit {int(code)})")

    from .runner import _policy_data

    record = {"kind": "comparison", "candidate": candidate_id, "baseline": baseline_id,
              "policy": _policy_data(policy), "slices_shown": show_slices, "lines": body,
              "decisions": [{"rule": d.rule.id, "verdict": d.verdict, "reason": d.reason} for d in decisions]}
    object_id = "sha256:" + digest(record)
    lines = [f"Comparison {object_id} of {candidate_id} against {baseline_id} · {len(ids)} paired cases", *body]
    record = {**record, "lines": lines}
    return lines, code, object_id, record


@frozen
class _GateView:
    verdict: str
