"""Compare two runs case by case: paired differences, decision rules, planning lines.

Cases pair by id. Per criterion, a pair counts when both judgments are observed; pairs with a
missing or excluded judgment are counted, with reasons, and never silently dropped. A missing
pair never helps a rule PASS. See ``docs/compare.md``.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from attrs import frozen

from oloproof_core.statistics import intervals as stats
from oloproof_core.config.documents import Document
from oloproof_core.model.errors import ConfigError
from oloproof_core.decisions.gate import Policy, Rule, gate, load_policy, policy_data
from oloproof_core.decisions.threshold import decide_on_run
from oloproof_core.decisions.planning import plan
from oloproof_core.model.identity import digest
from oloproof_core.model.records import LAST_TURN, Judgment

COMPARE_KINDS = ("non-inferiority", "superiority", "floor")
# Which rule fields each compare kind reads; any other field set on a rule is a mistake.
KIND_FIELDS = {"non-inferiority": {"margin"}, "superiority": {"margin"}, "floor": {"min"}}
RULE_BOUNDS = ("min", "max", "max_failures", "margin")


@frozen(kw_only=True)
class Paired:
    """One criterion over the paired cases: the differences and what was left out, and why."""

    criterion: str
    candidate: Sequence[float]  # observed values, pair by pair (an array('d') when streamed)
    baseline: Sequence[float]
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
        if not all(v in (0.0, 1.0) for v in chain(self.candidate, self.baseline)):
            return None
        b = sum(1 for x, y in zip(self.candidate, self.baseline) if y == 1.0 and x == 0.0)
        c = sum(1 for x, y in zip(self.candidate, self.baseline) if y == 0.0 and x == 1.0)
        return b, c

    def interval(self, confidence: float, impute: float | None = None) -> tuple[float, float, float]:
        """Mean difference and interval; ``impute`` (-1 or +1) adds each missing pair at that difference."""
        extra = (self.n_missing if self.missing_units is None else self.missing_units) if impute is not None else 0
        cand, base = self.candidate, self.baseline
        if extra:
            cand, base = array("d", cand), array("d", base)
            cand.extend([max(impute, 0.0)] * extra)
            base.extend([max(-impute, 0.0)] * extra)
        return stats.paired_difference(cand, base, confidence)


def _side(x: dict, y: dict, status: str) -> tuple[str, str]:
    """The reason a pair has ``status`` and the run(s) it comes from."""
    if x["status"] == status:
        return x.get("reason") or status, "both runs" if y["status"] == status else "candidate run"
    return y.get("reason") or status, "baseline run"


class Pairing:
    """One criterion's pairs, added case by case in the candidate's order: only the observed values
    (an ``array('d')`` each side), the counts of what was left out, and with ``clustered`` the
    running sums of each cluster, so a run of any length pairs in memory of a few numbers a case."""

    def __init__(self, criterion: str, clustered: bool = False):
        self.criterion, self.clustered = criterion, clustered
        self.cand, self.base = array("d"), array("d")
        self.missing, self.excluded = Counter(), Counter()
        self.clusters: dict[str, list] = {}  # key -> [sum of candidate values, of baseline values, pairs, whole]

    def add(self, candidate: Mapping, baseline: Mapping) -> None:
        """One case present in both runs (their records)."""
        criterion = self.criterion
        x, y = candidate["judgments"].get(criterion), baseline["judgments"].get(criterion)
        if x is None or y is None:
            self.missing[("not_judged", "candidate run" if x is None else "baseline run")] += 1
            self._cluster(candidate, None, None)
        elif x.get("reason") == LAST_TURN and y.get("reason") == LAST_TURN:
            return  # a conversation criterion on a turn it does not judge, by design: not an exclusion
        elif "excluded" in (x["status"], y["status"]):
            self.excluded[_side(x, y, "excluded")[0]] += 1
        elif "missing" in (x["status"], y["status"]):
            self.missing[_side(x, y, "missing")] += 1
            self._cluster(candidate, None, None)
        else:
            self._cluster(candidate, float(x["value"]), float(y["value"]))

    def _cluster(self, candidate: Mapping, x: float | None, y: float | None) -> None:
        if not self.clustered:
            if x is not None:
                self.cand.append(x)
                self.base.append(y)
            return
        sums = self.clusters.setdefault(candidate.get("cluster") or f"case:{candidate['id']}", [0, 0, 0, True])
        if x is None:
            sums[3] = False
        else:
            sums[0] += x
            sums[1] += y
            sums[2] += 1

    def paired(self) -> Paired:
        if not self.clustered:
            return Paired(criterion=self.criterion, candidate=self.cand, baseline=self.base, missing=self.missing,
                          excluded=self.excluded)
        whole = [sums for sums in self.clusters.values() if sums[3]]
        return Paired(criterion=self.criterion, candidate=array("d", (x / n for x, _, n, _ in whole)),
                      baseline=array("d", (y / n for _, y, n, _ in whole)), missing=self.missing,
                      excluded=self.excluded, unit="clusters", missing_units=len(self.clusters) - len(whole))


def pair(criterion: str, candidate: dict[str, dict], baseline: dict[str, dict], ids: Sequence[str],
         clustered: bool = False) -> Paired:
    """Pair one criterion's judgments over ``ids`` (case ids present in both runs).

    A case's value is its stored one: with trials, its mean over its trials. ``clustered`` pairs
    the cluster means instead (the candidate's clusters): a cluster with a missing pair is imputed
    as one unit."""
    pairing = Pairing(criterion, clustered)
    for case_id in ids:
        pairing.add(candidate[case_id], baseline[case_id])
    return pairing.paired()


def paired_records(candidate: Iterable[dict], baseline: Iterable[dict], unpaired: dict) -> Iterator[tuple[dict, dict | None]]:
    """Each candidate record with the baseline's record of the same case id (None: the baseline
    has none), in the candidate's order; ``unpaired`` gets ``baseline_only`` once both are read.

    Two runs of one suite list the same ids in the same order, and this is then a merge: one
    record of each run in memory. Otherwise a baseline record read before its pair is asked for
    is kept (its judgments only) until it is: a join whose memory grows with how far the orders
    differ, up to the whole baseline when the candidate has a case the baseline lacks."""
    ahead: dict[str, dict] = {}
    rest = iter(baseline)
    for x in candidate:
        y = ahead.pop(x["id"], None)
        if y is None:
            for y in rest:
                if y["id"] == x["id"]:
                    break
                ahead[y["id"]] = {"id": y["id"], "judgments": y["judgments"]}
            else:
                y = None
        yield x, y
    unpaired["baseline_only"] = len(ahead) + sum(1 for _ in rest)


@frozen(kw_only=True)
class Decision:
    """One compare rule's verdict, its reason and, when undecided, the planning figures."""

    rule: Rule
    verdict: str
    reason: str
    plan: dict | None = None  # see plan(); outputs/text.py says it in words


def decide(rule: Rule, p: Paired, confidence: float, metric: Any, changed: bool,
           candidate_judgments: Sequence[Judgment], candidate_header: Mapping[str, Any] | None = None,
           clusters: Sequence[str | None] | None = None) -> Decision:
    """One compare rule.

    A floor reads the candidate's own judgments (every case of the candidate run) and is decided
    exactly as the candidate run's gate decides a ``min`` rule (``threshold.decide_on_run``): over
    its clusters, with its trials' case means and its interval (a sequential run's confidence
    sequence). Paired rules compare the interval of the mean difference with the boundary
    (-margin for non-inferiority, +margin for superiority). Missing pairs never help: PASS must
    hold with each missing pair at the worst difference (-1), FAIL with each at the best (+1).
    """
    if rule.kind == "floor":
        # The baseline plays no part, so a criterion defined differently in it does not matter.
        d = decide_on_run(Rule(id=rule.id, metric=rule.metric, min=rule.min), candidate_header or {}, metric,
                          candidate_judgments, clusters, confidence)
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
    from oloproof_core.results.view import (COMPARISON_FORMAT, VERSION, case_changes, decision_entry, paired_entry, run_ref)

    cand_header, _ = store.get_run(candidate_id)
    base_header, _ = store.get_run(baseline_id)
    unpaired = {"candidate_only": 0, "baseline_only": 0}
    pairs = paired_records(store.run_cases(candidate_id), store.run_cases(baseline_id), unpaired)
    no_ids = ConfigError(f"{candidate_id} and {baseline_id} share no case ids, so no case can be paired",
                         fix="compare two runs of the same suite (cases pair by their id)")
    criteria = [c for c in cand_header["evaluators"] if c in base_header["evaluators"]]
    changed = {c for c in criteria if cand_header["evaluators"][c] != base_header["evaluators"][c]}
    problem = None
    if changed and not allow_different:
        problem = ConfigError(f"criterion {sorted(changed)[0]!r} is defined differently in the two runs "
                              "(same name, different evaluator config)",
                              fix="compare runs of the same evaluators, or pass --allow-different-evaluators "
                                  "(its rules then need manual review)")
    for rule in policy.rules if problem is None else ():
        if rule.metric not in criteria:
            problem = ConfigError(f"rule {rule.id!r} names metric {rule.metric!r}, which the two runs do not share",
                                  where=policy.where.get(rule.id), fix=f"use one of: {', '.join(criteria)}")
            break
    if problem is not None:  # runs that share no case say so first; the first pair found settles it
        if not any(y is not None for _, y in pairs):
            raise no_ids
        raise problem
    confidence = policy.confidence_level
    clustered = bool((cand_header.get("design") or {}).get("cluster"))
    pairings = {c: Pairing(c, clustered) for c in criteria}
    slices = _SlicePairings(cand_header, criteria, clustered)
    floors = {rule.metric: _Judgments(clustered) for rule in policy.rules if rule.kind == "floor"}
    changes, paired_cases = [], 0
    for x, y in pairs:  # one pass over both runs, in the candidate's case order
        for metric, judgments in floors.items():  # a floor reads every case of the candidate run
            if metric in x["judgments"]:
                judgments.add(x["judgments"][metric], x)
        if y is None:
            unpaired["candidate_only"] += 1
            continue
        paired_cases += 1
        for pairing in pairings.values():
            pairing.add(x, y)
        slices.add(x, y)
        changes += case_changes(x, y, criteria)
    if not paired_cases:
        raise no_ids
    paired = {c: pairings[c].paired() for c in criteria}
    metrics = {c: plugins.metrics.get(cand_header.get("metrics", {}).get(c, "proportion")).factory()
               for c in criteria}
    decisions = []
    for rule in policy.rules:
        floor = floors.get(rule.metric, _Judgments())
        decisions.append(decide(rule, paired[rule.metric], confidence, metrics[rule.metric],
                                rule.metric in changed, floor.judgments, cand_header, floor.clusters))
    verdict, code = gate([_GateView(d.verdict) for d in decisions], policy.block_on)

    view = {
        "format": COMPARISON_FORMAT, "version": VERSION, "id": None,
        "candidate": run_ref(cand_header), "baseline": run_ref(base_header),
        "confidence_level": confidence, "paired_cases": paired_cases,
        "unpaired": {"candidate_only": unpaired["candidate_only"], "baseline_only": unpaired["baseline_only"]},
        "not_compared": [{"criterion": c, "only_in": run}
                         for run, header, other in ((candidate_id, cand_header, base_header),
                                                    (baseline_id, base_header, cand_header))
                         for c in header["evaluators"] if c not in other["evaluators"]],
        "metrics": [{**paired_entry(paired[c], confidence), "evaluator_changed": c in changed} for c in criteria],
        "slices": slices.entries(confidence),
        "decisions": [decision_entry({"id": d.rule.id, "metric": d.rule.metric, "kind": d.rule.kind,
                                      **{k: getattr(d.rule, k) for k in RULE_BOUNDS}},
                                     d.verdict, d.reason, policy.block_on, compared=True, plan=d.plan)
                      for d in decisions],
        "gate": {"verdict": verdict, "exit_code": int(code), "block_on": list(policy.block_on), "policy": True},
        # every changed case: the stored comparison lists them all, and its id is their digest
        "changed_cases": changes,
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


class _Judgments:
    """A criterion's judgments over a run's cases, for a floor rule (which reads only their status
    and value, and each case's cluster): one shared Judgment per distinct (status, value), so a case
    costs one reference (and its cluster's name, shared with the record it came from)."""

    def __init__(self, clustered: bool = False) -> None:
        self.judgments: list[Judgment] = []
        self.clusters: list[str] | None = [] if clustered else None
        self._shared: dict[tuple, Judgment] = {}

    def add(self, data: Mapping, record: Mapping) -> None:
        key = (data["status"], data.get("value"))
        if key not in self._shared:
            self._shared[key] = Judgment(status=key[0], value=key[1])
        self.judgments.append(self._shared[key])
        if self.clusters is not None:
            self.clusters.append(record.get("cluster") or f"case:{record['id']}")


class _SlicePairings:
    """The pairs of each slice group of the candidate run and criterion, added case by case; one
    exploratory entry each with at least one observed pair."""

    def __init__(self, header: dict, criteria: Sequence[str], clustered: bool):
        self.header, self.criteria, self.clustered = header, criteria, clustered
        self.groups: dict[str, dict[str, dict[str, Pairing]]] = {name: {} for name in header.get("slices", [])}

    def add(self, candidate: Mapping, baseline: Mapping) -> None:
        for name, groups in self.groups.items():
            key = (candidate.get("slices") or {}).get(name)
            if key is None:
                continue
            if key not in groups:
                shown = (self.header.get("slice_criteria") or {}).get(name)  # None: every criterion
                groups[key] = {c: Pairing(c, self.clustered) for c in self.criteria if shown is None or c in shown}
            for pairing in groups[key].values():
                pairing.add(candidate, baseline)

    def entries(self, confidence: float) -> list[dict]:
        from oloproof_core.results.view import paired_entry

        out = []
        support = self.header.get("min_slice_support", 10)
        for name, groups in self.groups.items():
            for key in sorted(groups):
                for pairing in groups[key].values():
                    p = pairing.paired()
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
