"""Units of analysis: repeated trials of a case, and clusters of cases.

``trials: N`` runs every case N times; ``cluster: metadata.source`` makes the cases that share a
value one unit. Either way the unit stays independent of the others while the observations inside
it need not be, so every interval is over units (Miller 2024, "Adding Error Bars to Evals"): the
betting interval over the unit means (Waudby-Smith & Ramdas 2024), valid for any bounded independent
values whatever the correlation inside a unit; for clusters with the case-weighted estimand, the
betting interval of ``S_g − θ n_g`` (``weighted.py``); and the exact Clopper–Pearson interval when
every unit is one case judged pass or fail once (its values are 0 or 1 by construction). A suite
with neither setting is summarised exactly as before: these functions are not called.

Pure functions of judgments; nothing here formats text beyond the metric table's cells
(``display.py``) or touches the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attrs import frozen

from oloproof_core.model.records import Case, Judgment, Summary, select, tally

# numpy and scipy (through stats and display) are imported inside the functions that use them, so
# loading a suite stays cheap

PASS_ALL = "pass_all_k"
#: What a clustered run estimates: the mean of the cluster means (every cluster weighs the same), or
#: the case-weighted mean (every case counts once; the default when the suite sets max_cluster_size)
ESTIMANDS = ("cluster-means", "cases")


ALL_TURNS = " (all turns)"  # a conversation criterion: a conversation passes when every turn passed


def all_turns_name(criterion: str) -> str:
    """The conversation criterion of a pass/fail criterion of a suite with conversations."""
    return f"{criterion}{ALL_TURNS}"


def pass_all_name(criterion: str) -> str:
    """The derived criterion of a pass/fail criterion: a case passes only if every trial passes."""
    return f"{criterion}.{PASS_ALL}"


@frozen(kw_only=True)
class Design:
    """How a run's observations group into units: trials per case, and the case field clusters share."""

    trials: int = 1
    cluster: str | None = None  # a case field path (metadata.source); None: every case is its own unit
    max_cluster_size: int = 10  # a cluster of more cases than this is reported
    estimand: str = "cluster-means"  # with clusters: "cluster-means" or "cases" (case-weighted)

    @property
    def plain(self) -> bool:
        """Neither trials nor clusters: a run summarised as before."""
        return self.trials == 1 and self.cluster is None

    def record(self) -> dict:
        """What a run header records (only for a run with trials or clusters)."""
        record = {"trials": self.trials, "cluster": self.cluster, "max_cluster_size": self.max_cluster_size}
        if self.cluster is not None:
            record["estimand"] = self.estimand
        return record

    @property
    def weighted(self) -> bool:
        """Clusters, and the case-weighted estimand."""
        return self.cluster is not None and self.estimand == "cases"


def cluster_of(case: Case, path: str | None) -> str | None:
    """The cluster of ``case``: the value at ``path`` of its record (``metadata.source``), as text; a
    case without the field is a cluster of its own (``case:<id>``). None when no clustering."""
    if path is None:
        return None
    value = select(case.to_data(), path)
    if value is None:
        return f"case:{case.id}"
    return value if isinstance(value, str) else str(value)


def combine_trials(trials: Sequence[Judgment]) -> Judgment:
    """One case's judgment from its trials' judgments of one criterion.

    Excluded when the evaluator does not apply; missing when any trial is missing (so a missing
    trial never helps a rule pass); else the mean over trials as the value. A pass/fail criterion
    passes only when every trial passed and fails when any failed (an ``observed_count`` rule
    counts a case that failed in any trial); a score criterion is a score.
    """
    if len(trials) == 1:
        return trials[0]
    for j in trials:
        if j.status == "excluded":
            return j
    for t, j in enumerate(trials):
        if j.status == "missing":
            return Judgment.missing(f"trial {t}: {j.reason or 'missing'}")
    values = [float(j.value) for j in trials]
    mean = sum(values) / len(values)
    if all(j.status in ("pass", "fail") for j in trials):
        passed = sum(1 for j in trials if j.status == "pass")
        detail = {"trials": len(trials), "passed": passed}
        status = "pass" if passed == len(trials) else "fail"
        return Judgment(status=status, value=mean, reason=f"passed {passed} of {len(trials)} trials", detail=detail)
    return Judgment.score(mean, trials=len(trials))


def pass_all(trials: Sequence[Judgment]) -> Judgment:
    """pass^k of one case: pass when every trial passed, fail when any failed (missing, excluded as
    :func:`combine_trials`)."""
    joined = combine_trials(trials)
    if not joined.observed:
        return joined
    ok = joined.status == "pass"
    return Judgment.of(ok, None if ok else joined.reason)


def group(judgments: Sequence[Judgment], keys: Sequence[str | None]) -> list[Judgment]:
    """The unit judgments: one per cluster (the mean of its cases' values) when ``keys`` name
    clusters, else the judgments themselves.

    A cluster whose cases are all excluded is excluded; one with a missing case is missing as a
    whole (counted at the worst and best values by the gate, like a missing case); else a score
    whose value is the mean of its observed cases, with ``detail.cases`` their count (and
    ``detail.failures`` and ``detail.missing_cases``, which an observed_count rule counts).
    """
    if not keys or keys[0] is None:
        return list(judgments)
    members: dict[str, list[Judgment]] = {}
    for j, key in zip(judgments, keys):
        members.setdefault(key, []).append(j)
    out = []
    for key, js in members.items():
        counted = [j for j in js if j.status != "excluded"]
        # the failed and missing cases, which an observed_count rule counts case by case
        counts = {"cluster": key, "cases": len(counted), "failures": sum(1 for j in counted if j.status == "fail"),
                  "missing_cases": sum(1 for j in counted if j.status == "missing")}
        if not counted:
            out.append(Judgment(status="excluded", reason=js[0].reason, detail=counts))
        elif counts["missing_cases"]:
            out.append(Judgment(status="missing", reason=next(j.reason for j in counted if j.status == "missing"),
                                detail=counts))
        else:
            out.append(Judgment(status="score", value=sum(float(j.value) for j in counted) / len(counted),
                                detail=counts))
    return out


class UnitMetric:
    """A metric summarised over units (cases with trials, or clusters), with the unit's interval:

    - every unit one case whose value is 0 or 1 by construction (a pass/fail criterion judged once, or
      pass_all_k; single-case clusters): the exact Clopper–Pearson interval of the cases;
    - clusters with the case-weighted estimand: ``Σ S_g / Σ n_g`` and ``weighted.case_weighted_interval``;
    - otherwise the mean of the unit values, with the betting interval on [0, 1] over them.

    The wrapped metric gives the name, and the display (a percentage for a proportion, three
    decimals for a mean). ``interval`` takes each unit's number of cases (``sizes``; None: one each),
    which the gate reads from the units (``decisions/threshold.py``).
    """

    sized = True  # its interval reads the units' sizes

    def __init__(self, inner: Any, design: Design, binary_cases: bool = False, unit: str = "case"):
        self.inner, self.design, self.binary_cases = inner, design, binary_cases
        self.unit = unit  # what one judgment is: a case, or a conversation (an all-turns criterion)
        self.name = getattr(inner, "name", None)
        self.pass_fail = getattr(inner, "pass_fail", False)

    def exact(self, sizes: Sequence[int] | None) -> bool:
        """Every unit is one case whose value is 0 or 1: Clopper–Pearson applies exactly."""
        return self.binary_cases and (sizes is None or all(s == 1 for s in sizes))

    def interval(self, values: Sequence[float], confidence: float,
                 sizes: Sequence[int] | None = None) -> tuple[float, float]:
        from oloproof_core.statistics import intervals as stats

        if self.exact(sizes):
            return stats.clopper_pearson(int(round(sum(values))), len(values), confidence)
        if self.design.weighted and sizes is not None:
            from oloproof_core.statistics.weighted import case_weighted_interval

            return case_weighted_interval([v * s for v, s in zip(values, sizes)], sizes, confidence)
        return stats.betting_interval(values, confidence, 0.0, 1.0)

    def summarize(self, judgments: Sequence[Judgment], confidence: float) -> Summary:
        from oloproof_core.statistics import display

        values, missing, excluded = tally(judgments)
        sizes = unit_sizes(judgments)[0] if self.design.cluster is not None else None
        n = len(values)
        if not n:
            mean = None
        elif self.design.weighted and sizes is not None:
            mean = sum(v * s for v, s in zip(values, sizes)) / sum(sizes)
        else:
            mean = sum(values) / n
        low, high = self.interval(values, confidence, sizes) if n else (None, None)
        counts = self.counts(judgments, n, missing, excluded)
        if n == 0:
            cells = ("—", "—", counts)
        elif self.pass_fail:
            cells = (display.percent(mean), display.percent_bounds(low, high), counts)
        else:
            cells = display.mean_cells(mean, n, low, high, missing, excluded)[:2] + (counts,)
        # not a plain proportion: its value is a mean of unit fractions, with no count of successes
        return Summary(metric=f"{self.name}/units", value=mean, low=low, high=high, observed=n, missing=missing,
                       excluded=excluded, cells=cells)

    def counts(self, judgments: Sequence[Judgment], n: int, missing: int, excluded: int) -> str:
        """What the estimate is a mean of: ``mean of 40 cases × 5 trials · 0 missing · 0 excluded``;
        with clusters ``mean of 12 cluster means (40 cases) · ...`` or, case-weighted, ``mean of 40
        cases in 12 clusters · ...`` (a clustered run counts clusters missing). An all-turns
        criterion counts conversations, one judgment each: ``mean of 24 conversations in 24 clusters``."""
        tail = f"{missing} missing · {excluded} excluded"
        trials = f" × {self.design.trials} trials" if self.design.trials > 1 else ""

        def units(count: int) -> str:
            return f"{count} {self.unit}{'' if count == 1 else 's'}"

        if self.design.cluster is None:
            return f"mean of {units(n)}{trials} · {tail}"
        cases = sum(int(j.detail.get("cases", 0)) for j in judgments if j.observed)
        clusters = f"{n} cluster{'' if n == 1 else 's'}"
        head = (f"mean of {units(cases)}{trials} in {clusters}" if self.design.weighted
                else f"mean of {n} cluster mean{'' if n == 1 else 's'} ({units(cases)}{trials})")
        return f"{head} · {missing} cluster{'' if missing == 1 else 's'} missing · {excluded} excluded"


def unit_sizes(judgments: Sequence[Judgment]) -> tuple[list[int], list[int]]:
    """The number of cases of each observed unit, and of each missing unit, in order (a unit made by
    :func:`group` records it as ``detail.cases``; any other judgment is one case)."""
    observed, missing = [], []
    for j in judgments:
        if j.status == "excluded":
            continue
        size = int(j.detail.get("cases", 1)) if j.detail else 1
        (missing if j.status == "missing" else observed).append(max(size, 1))
    return observed, missing


def unit_metrics(metrics: Mapping[str, Any], design: Design) -> dict:
    """The metrics a run with trials or clusters summarises with: every criterion over units, but a
    pass^k criterion of unclustered cases keeps its exact Clopper–Pearson interval (each case is one
    independent pass or fail). A case's value is 0 or 1 by construction for a pass/fail criterion
    judged once, and for pass^k: over single-case clusters those get Clopper–Pearson too."""
    out = {}
    for name, metric in metrics.items():
        pass_all = name.endswith("." + PASS_ALL)
        if pass_all and design.cluster is None:
            out[name] = metric
        else:
            binary = bool(getattr(metric, "pass_fail", False)) and (design.trials == 1 or pass_all)
            out[name] = UnitMetric(metric, design, binary, "conversation" if name.endswith(ALL_TURNS) else "case")
    return out


def instability(trials: Sequence[Sequence[Judgment]], keys: Sequence[str | None], confidence: float) -> dict | None:
    """How many cases changed verdict across their trials, for one pass/fail criterion.

    A case counts when every trial was observed; it is unstable when some trials passed and some
    failed. The interval is Clopper–Pearson over the cases, or, in a clustered run with a cluster of
    more than one case, the betting interval over the clusters' unstable fractions.
    """
    from oloproof_core.statistics import intervals as stats

    flags, flag_keys = [], []
    for js, key in zip(trials, keys):
        if js and all(j.status in ("pass", "fail") for j in js):
            flags.append(len({j.status for j in js}) > 1)
            flag_keys.append(key)
    n, k = len(flags), sum(flags)
    if n == 0:
        return None
    units = group([Judgment.of(f) for f in flags], flag_keys) if flag_keys and flag_keys[0] is not None else None
    if units is not None and any(int(u.detail.get("cases", 1)) > 1 for u in units):
        low, high = stats.betting_interval([u.value for u in units], confidence, 0.0, 1.0)
        method = "betting over clusters"
    else:  # cases, or clusters of one case each: each flag is one independent 0 or 1
        low, high = stats.clopper_pearson(k, n, confidence)
        method = "clopper-pearson"
    return {"unstable": k, "cases": n, "trials": len(trials[0]) if trials else 0, "low": low, "high": high,
            "method": method}


def derived_criteria(evaluators: Mapping[str, Any], metrics: Mapping[str, str], criteria: Sequence[str],
                     design: Design) -> tuple[dict, dict]:
    """A run header's evaluators and metrics with the suite's pass^k ``criteria`` added: each is
    derived from its criterion's identity, so compare and the viewer treat it as a criterion."""
    evaluators, metrics = dict(evaluators), dict(metrics)
    for derived in criteria:
        if derived.endswith(ALL_TURNS) and derived not in evaluators:  # conversations (engine/conversations.py)
            evaluators[derived] = {"derived": "all_turns", "of": evaluators[derived[:-len(ALL_TURNS)]]}
            metrics[derived] = "proportion"
        if derived.endswith("." + PASS_ALL) and derived not in evaluators:
            of = derived[:-len(PASS_ALL) - 1]
            evaluators[derived] = {"derived": PASS_ALL, "of": evaluators[of], "trials": design.trials}
            metrics[derived] = "proportion"
    return evaluators, metrics


def unit_figures(design: Design, metrics: Mapping[str, Any], trials: Sequence[Sequence[Mapping[str, Judgment]]],
                 keys: Sequence[str | None], confidence: float) -> dict:
    """What a run with trials or clusters adds to its summary: the ``instability`` of each pass/fail
    criterion (``trials`` holds each case's judgments, trial by trial) and the ``clusters``."""
    figures: dict = {}
    if design.trials > 1:
        figures["instability"] = {}
        for criterion, metric in metrics.items():
            if getattr(metric, "pass_fail", False) and not criterion.endswith(("." + PASS_ALL, ALL_TURNS)):
                found = instability([[j[criterion] for j in case] for case in trials], keys, confidence)
                if found is not None:
                    figures["instability"][criterion] = found
    if design.cluster is not None:
        figures["clusters"] = clusters_record(keys, design.max_cluster_size)
    return figures


def cluster_sizes(keys: Sequence[str | None]) -> dict[str, int]:
    """Cases per cluster, largest first."""
    sizes: dict[str, int] = {}
    for key in keys:
        if key is not None:
            sizes[key] = sizes.get(key, 0) + 1
    return dict(sorted(sizes.items(), key=lambda item: (-item[1], item[0])))


def clusters_record(keys: Sequence[str | None], limit: int) -> dict:
    """What a clustered run records: the counts, and the clusters over ``limit`` cases."""
    sizes = cluster_sizes(keys)
    return {"cases": len(keys), "clusters": len(sizes), "limit": limit,
            "large": [{"cluster": key, "cases": n} for key, n in sizes.items() if n > limit]}


def planning_total(differences: Sequence[float], margin: float, confidence: float,
                   limit: int = 100_000) -> int | None:
    """The smallest number of paired units that would decide a rule with boundary ``-margin`` if
    the observed differences held: each distinct difference keeps its share of the total (counts
    scaled and rounded half up, as :func:`stats.planning_total` scales discordant pairs).

    For a total N the lower bound exceeds ``-margin`` exactly when the upward capital at
    m0 = (1 - margin)/2 exceeds 2/α (likewise the upper bound), so each N costs two capital
    evaluations over the few distinct differences; the first hit is confirmed with the interval.

    :param differences: the observed paired differences, each in [-1, 1].
    With differences of -1, 0 and +1 only, mostly 0, it is :func:`stats.planning_total`.

    :return: the total, or None when nothing up to ``limit`` decides it.
    """
    import math

    import numpy as np

    from oloproof_core.statistics import intervals as stats

    if not -1.0 < margin < 1.0:
        raise ValueError(f"margin must be a fraction in (-1, 1), got {margin!r}")
    alpha = 1.0 - confidence
    data = np.asarray(differences, dtype=float)
    n = data.size
    levels, counts = np.unique(np.clip((data + 1.0) / 2.0, 0.0, 1.0), return_counts=True)
    top = int(np.argmax(counts))
    threshold, m0 = math.log(2.0 / alpha), (1.0 - margin) / 2.0
    log_up = np.log1p(np.multiply.outer(stats.BETS / m0, levels - m0))
    log_down = np.log1p(np.multiply.outer(-stats.BETS / (1.0 - m0), levels - m0))

    def decided(log_factors: np.ndarray, grouped: np.ndarray) -> np.ndarray:
        products = log_factors @ grouped
        top = products.max(axis=0)
        return top + np.log(np.exp(products - top).sum(axis=0)) - math.log(len(stats.BETS)) > threshold

    # totals are tried a chunk at a time; a chunk's table (levels x totals) is kept under 2**19
    # numbers, so graded scores with as many levels as cases do not take memory in proportion
    start, chunk, cells = n + 1, 1024, 1 << 19
    while start <= limit:
        totals = np.arange(start, min(start + max(1, min(chunk, cells // len(levels))), limit + 1), dtype=np.int64)
        grouped = np.floor(np.multiply.outer(counts, totals) / n + 0.5)
        # the most frequent difference takes the remainder, so the counts add up to the total
        grouped[top] = 0
        grouped[top] = np.maximum(totals - grouped.sum(axis=0), 0)
        hits = decided(log_up, grouped) | decided(log_down, grouped)
        for index in np.flatnonzero(hits):
            values = np.repeat(2.0 * levels - 1.0, grouped[:, index].astype(np.int64))
            low, high = stats.betting_interval(values, confidence, -1.0, 1.0)
            if low > -margin or high < -margin:
                return int(totals[index])
        start += totals.size
        chunk = min(chunk * 4, 65_536)
    return None
