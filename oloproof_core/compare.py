"""Compare two runs case by case: paired differences, decision rules, planning lines.

Cases pair by id. Per criterion, a pair counts when both judgments are observed; pairs with a
missing or excluded judgment are counted, with reasons, and never silently dropped. A missing
pair never helps a rule PASS. See ``docs/compare.md``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from . import stats
from .config import Document
from .errors import ConfigError
from .gate import Policy, Rule, decide_rule, gate, load_policy, policy_data
from .identity import digest
from .model import Judgment

COMPARE_KINDS = ("non-inferiority", "superiority", "floor")
PLANNING_LIMIT = 100_000
# Which rule fields each compare kind reads; any other field set on a rule is a mistake.
KIND_FIELDS = {"non-inferiority": {"margin"}, "superiority": {"margin"}, "floor": {"min"}}
RULE_BOUNDS = ("min", "max", "max_failures", "margin")


@frozen(kw_only=True)
class Paired:
    """One criterion over the paired cases: the differences and what was left out, and why."""

    criterion: str
    candidate: list[float]  # observed values, pair by pair
    baseline: list[float]
    missing: Counter  # reason (and which run) -> pairs
    excluded: Counter  # reason -> pairs
    unit: str = "cases"  # "clusters": candidate and baseline are cluster means of the paired cases
    missing_units: int | None = None  # clusters with a missing pair, each imputed as one unit

    @property
    def n(self) -> int:
        return len(self.candidate)

    @property
    def n_missing(self) -> int:
        return sum(self.missing.values())

    @property
    def discordant(self) -> tuple[int, int] | None:
        """(pass→fail, fail→pass) when every value is 0 or 1, else None."""
        if not all(v in (0.0, 1.0) for v in self.candidate + self.baseline):
            return None
        b = sum(1 for x, y in zip(self.candidate, self.baseline) if y == 1.0 and x == 0.0)
        c = sum(1 for x, y in zip(self.candidate, self.baseline) if y == 0.0 and x == 1.0)
        return b, c

    def interval(self, confidence: float, impute: float | None = None) -> tuple[float, float, float]:
        """Mean difference and interval; ``impute`` (-1 or +1) adds each missing pair at that difference."""
        extra = (self.n_missing if self.missing_units is None else self.missing_units) if impute is not None else 0
        cand = self.candidate + [max(impute, 0.0)] * extra if extra else self.candidate
        base = self.baseline + [max(-impute, 0.0)] * extra if extra else self.baseline
        return stats.paired_difference(cand, base, confidence)


def _side(x: dict, y: dict, status: str) -> tuple[str, str]:
    """The reason a pair has ``status`` and the run(s) it comes from."""
    if x["status"] == status:
        return x.get("reason") or status, "both runs" if y["status"] == status else "candidate run"
    return y.get("reason") or status, "baseline run"


def pair(criterion: str, candidate: dict[str, dict], baseline: dict[str, dict], ids: Sequence[str],
         clustered: bool = False) -> Paired:
    """Pair one criterion's judgments over ``ids`` (case ids present in both runs).

    A case's value is its stored one: with trials, its mean over its trials. ``clustered`` pairs
    the cluster means instead (the candidate's clusters): a cluster with a missing pair is imputed
    as one unit."""
    cand, base, missing, excluded = [], [], Counter(), Counter()
    clusters: dict[str, list[tuple[float, float] | None]] = {}
    for case_id in ids:
        x, y = candidate[case_id]["judgments"].get(criterion), baseline[case_id]["judgments"].get(criterion)
        key = candidate[case_id].get("cluster") or f"case:{case_id}"
        if x is None or y is None:
            missing[("not_judged", "candidate run" if x is None else "baseline run")] += 1
            clusters.setdefault(key, []).append(None)
        elif "excluded" in (x["status"], y["status"]):
            excluded[_side(x, y, "excluded")[0]] += 1
        elif "missing" in (x["status"], y["status"]):
            missing[_side(x, y, "missing")] += 1
            clusters.setdefault(key, []).append(None)
        else:
            cand.append(float(x["value"]))
            base.append(float(y["value"]))
            clusters.setdefault(key, []).append((cand[-1], base[-1]))
    if not clustered:
        return Paired(criterion=criterion, candidate=cand, baseline=base, missing=missing, excluded=excluded)
    whole = [pairs for pairs in clusters.values() if None not in pairs]
    return Paired(criterion=criterion, candidate=[sum(x for x, _ in p) / len(p) for p in whole],
                  baseline=[sum(y for _, y in p) / len(p) for p in whole], missing=missing, excluded=excluded,
                  unit="clusters", missing_units=len(clusters) - len(whole))


@frozen(kw_only=True)
class Decision:
    """One compare rule's verdict, its reason and, when undecided, the planning figures."""

    rule: Rule
    verdict: str
    reason: str
    plan: dict | None = None  # see plan(); outputs/text.py says it in words


def decide(rule: Rule, p: Paired, confidence: float, metric: Any, changed: bool,
           candidate_judgments: Sequence[Judgment]) -> Decision:
    """One compare rule.

    A floor reads the candidate's own judgments (every case of the candidate run), like a run's
    ``min`` rule. Paired rules compare the interval of the mean difference with the boundary
    (-margin for non-inferiority, +margin for superiority). Missing pairs never help: PASS must
    hold with each missing pair at the worst difference (-1), FAIL with each at the best (+1).
    """
    if rule.kind == "floor":
        # The baseline plays no part, so a criterion defined differently in it does not matter.
        d = decide_rule(Rule(id=rule.id, metric=rule.metric, min=rule.min), candidate_judgments, metric, confidence)
        return Decision(rule=rule, verdict=d.verdict, reason=d.reason)
    if changed:
        return Decision(rule=rule, verdict="MANUAL_REVIEW", reason="evaluator_changed")
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
    if p.n_missing and (low > boundary or high < boundary):
        return Decision(rule=rule, verdict="INSUFFICIENT_EVIDENCE", reason="missing_cases_could_change_it")
    return Decision(rule=rule, verdict="INSUFFICIENT_EVIDENCE", reason="interval_overlaps_margin",
                    plan=plan(p, -boundary, confidence))


def plan(p: Paired, margin: float, confidence: float) -> dict | None:
    """How many more pairs would decide the rule if the observed difference and discordance held.

    :param margin: the boundary as ``-margin`` (a fraction), as :func:`stats.planning_total` takes it.
    :return: ``{"paired", "total", "discordance", "limit"}`` (``total`` None: no total up to
        ``limit`` decides it; ``discordance`` in whole percent), graded differences' figures
        (:func:`_graded_planning`), or None when no pair differs (nothing to scale).
    """
    counts = p.discordant
    if counts is None:  # graded differences (trial means, cluster means, scores)
        return _graded_planning(p, margin, confidence)
    if sum(counts) == 0:
        return None
    b, c = counts
    return {"paired": p.n, "total": stats.planning_total(b, c, p.n, margin, confidence, limit=PLANNING_LIMIT),
            "discordance": int(stats.round_half_up(100 * (b + c) / p.n, 0)), "limit": PLANNING_LIMIT}


def _graded_planning(p: Paired, margin: float, confidence: float) -> dict | None:
    """The planning figures of differences that are not all -1, 0 or +1 (:func:`units.planning_total`):
    ``{"paired", "total", "limit", "graded": True, "unit"}``."""
    from .units import planning_total

    differences = [x - y for x, y in zip(p.candidate, p.baseline)]
    if not differences or not any(differences):
        return None
    total = planning_total(differences, margin, confidence, limit=PLANNING_LIMIT)
    return {"paired": p.n, "total": total, "limit": PLANNING_LIMIT, "graded": True, "unit": p.unit}


def load_compare_policy(path: Path) -> Policy:
    """Load a compare policy: every rule has a compare kind and exactly the fields that kind reads."""
    doc = Document.load(path, fix="create it, or pass another file with --policy")
    rules = doc.data.get("rules") if isinstance(doc.data, dict) else None
    for i, raw in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(raw, dict) and "kind" not in raw:  # else the run policy's `interval` default applies
            raise ConfigError("a compare rule needs a kind", where=doc.where(("rules", i)),
                              fix=f"add `kind:` with one of: {', '.join(COMPARE_KINDS)}")
    policy = load_policy(doc, doc.data, path.parent, ())
    for i, rule in enumerate(policy.rules):
        at = ("rules", i)
        if rule.kind not in COMPARE_KINDS:
            raise ConfigError(f"rule {rule.id!r} has kind {rule.kind!r}, which compare does not decide",
                              where=doc.where(at + ("kind",)), fix=f"use one of: {', '.join(COMPARE_KINDS)}")
        for name in RULE_BOUNDS:
            if getattr(rule, name) is not None and name not in KIND_FIELDS[rule.kind]:
                raise ConfigError(f"rule {rule.id!r} of kind {rule.kind} does not read {name}",
                                  where=doc.where(at + (name,)),
                                  fix=f"remove {name}; a {rule.kind} rule takes "
                                      f"{' and '.join(sorted(KIND_FIELDS[rule.kind]))}")
        if rule.kind == "floor" and rule.min is None:
            raise ConfigError(f"rule {rule.id!r} of kind floor needs min", where=doc.where(at),
                              fix="add `min: 0.70` (a fraction: 70%)")
        if rule.kind == "floor" and not 0.0 <= rule.min <= 1.0:
            raise ConfigError(f"min must be a fraction between 0 and 1, got {rule.min}",
                              where=doc.where(at + ("min",)), fix="write min: 0.70 for 70%")
        if rule.kind != "floor" and rule.margin is not None and not 0 <= rule.margin < 100:
            raise ConfigError(f"margin is in points, at least 0 and below 100, got {rule.margin}",
                              where=doc.where(at + ("margin",)), fix="write margin: 5.0 for five points")
    return policy


def compare_runs(store: Any, plugins: Any, candidate_id: str, baseline_id: str, policy: Policy,
                 allow_different: bool) -> tuple[dict, dict]:
    """The comparison as data (the ``oloproof.comparison`` view, see outputs/view.py) and the
    record stored under its content id.

    The id does not depend on how the comparison is shown: the stored record always lists the
    slice lines.
    """
    from .outputs.view import COMPARISON_FORMAT, VERSION, changed_cases, decision_entry, paired_entry, run_ref

    cand_header, _ = store.get_run(candidate_id)
    base_header, _ = store.get_run(baseline_id)
    cand = {r["id"]: r for r in store.run_cases(candidate_id)}
    base = {r["id"]: r for r in store.run_cases(baseline_id)}
    ids = [i for i in cand if i in base]
    if not ids:
        raise ConfigError(f"{candidate_id} and {baseline_id} share no case ids, so no case can be paired",
                          fix="compare two runs of the same suite (cases pair by their id)")
    criteria = [c for c in cand_header["evaluators"] if c in base_header["evaluators"]]
    changed = {c for c in criteria if cand_header["evaluators"][c] != base_header["evaluators"][c]}
    if changed and not allow_different:
        raise ConfigError(f"criterion {sorted(changed)[0]!r} is defined differently in the two runs "
                          "(same name, different evaluator config)",
                          fix="compare runs of the same evaluators, or pass --allow-different-evaluators "
                              "(its rules then need manual review)")
    for rule in policy.rules:
        if rule.metric not in criteria:
            raise ConfigError(f"rule {rule.id!r} names metric {rule.metric!r}, which the two runs do not share",
                              where=policy.where.get(rule.id), fix=f"use one of: {', '.join(criteria)}")
    confidence = policy.confidence_level
    clustered = bool((cand_header.get("design") or {}).get("cluster"))
    paired = {c: pair(c, cand, base, ids, clustered) for c in criteria}
    metrics = {c: plugins.metrics.get(cand_header.get("metrics", {}).get(c, "proportion")).factory()
               for c in criteria}
    decisions = []
    for rule in policy.rules:
        judgments = [Judgment.from_data(r["judgments"][rule.metric]) for r in cand.values()
                     if rule.metric in r["judgments"]]
        decisions.append(decide(rule, paired[rule.metric], confidence, metrics[rule.metric],
                                rule.metric in changed, judgments))
    verdict, code = gate([_GateView(d.verdict) for d in decisions], policy.block_on)

    view = {
        "format": COMPARISON_FORMAT, "version": VERSION, "id": None,
        "candidate": run_ref(cand_header), "baseline": run_ref(base_header),
        "confidence_level": confidence, "paired_cases": len(ids),
        "unpaired": {"candidate_only": sum(1 for i in cand if i not in base),
                     "baseline_only": sum(1 for i in base if i not in cand)},
        "not_compared": [{"criterion": c, "only_in": run}
                         for run, header, other in ((candidate_id, cand_header, base_header),
                                                    (baseline_id, base_header, cand_header))
                         for c in header["evaluators"] if c not in other["evaluators"]],
        "metrics": [{**paired_entry(paired[c], confidence), "evaluator_changed": c in changed} for c in criteria],
        "slices": _slices(cand_header, cand, base, ids, criteria, confidence, clustered),
        "decisions": [decision_entry({"id": d.rule.id, "metric": d.rule.metric, "kind": d.rule.kind,
                                      **{k: getattr(d.rule, k) for k in RULE_BOUNDS}},
                                     d.verdict, d.reason, policy.block_on, compared=True, plan=d.plan)
                      for d in decisions],
        "gate": {"verdict": verdict, "exit_code": int(code), "block_on": list(policy.block_on), "policy": True},
        "changed_cases": changed_cases(cand, base, ids, criteria),
        "exit_code": int(code),
    }
    units = _units(cand_header, base_header)
    if units:
        view["units"] = units
    # the stored record is the view itself (its id left out, as the id is the record's digest):
    # `inspect` and the viewer render it as `compare --slices` prints it
    record = {"kind": "comparison", "candidate": candidate_id, "baseline": baseline_id,
              "policy": policy_data(policy),
              "decisions": [{"rule": d.rule.id, "verdict": d.verdict, "reason": d.reason} for d in decisions],
              "view": view}
    view = {**view, "id": "sha256:" + digest(record)}
    return view, record


def _slices(header: dict, cand: dict, base: dict, ids: Sequence[str], criteria: Sequence[str],
            confidence: float, clustered: bool = False) -> list[dict]:
    """One entry per slice of the candidate run and criterion with at least one observed pair."""
    from .outputs.view import paired_entry

    out = []
    support = header.get("min_slice_support", 10)
    for name in header.get("slices", []):
        shown = (header.get("slice_criteria") or {}).get(name)  # None: every criterion
        groups: dict[str, list[str]] = {}
        for i in ids:
            key = (cand[i].get("slices") or {}).get(name)
            if key is not None:
                groups.setdefault(key, []).append(i)
        for key in sorted(groups):
            for c in criteria if shown is None else [c for c in criteria if c in shown]:
                p = pair(c, cand, base, groups[key], clustered)
                if p.n:  # too few pairs for an interval worth printing: the difference alone
                    out.append({"slice": name, "group": key, **paired_entry(p, confidence, p.n >= support)})
    return out


def _units(*headers: dict) -> dict | None:
    """How the pairs were counted, when either run had trials or the candidate clusters (else None,
    and the comparison is as before)."""
    designs = [h.get("design") or {} for h in headers]
    if not any(designs):
        return None
    return {"cluster": designs[0].get("cluster"), "trials": {"candidate": designs[0].get("trials", 1),
                                                             "baseline": designs[1].get("trials", 1)}}


@frozen
class _GateView:
    verdict: str
