"""``oloproof judge validate``: how far a judge agrees with human labels, stored as the evidence
the gate requires before a rule on a judge's criterion may gate.

The labels file has one JSON object a line: ``id`` (a case of the suite), ``label`` (true or
"pass" when the human says the criterion holds, false or "fail" otherwise), and optionally
``output`` with ``artifacts`` (judge this output instead of a run's) and ``note``. The judge
reads the recorded execution of the case in ``--run`` (default: the latest run of the config).

Agreement, the true-positive rate (the judge passes what the human passes) and the true-negative
rate (the judge fails what the human fails) get Clopper–Pearson intervals; Cohen's kappa gets the
large-sample interval ``kappa ± z·SE`` with the standard error of Fleiss, Cohen & Everitt (1969).
docs/judges.md shows the arithmetic.
"""

from __future__ import annotations

import difflib
import math
from collections import Counter
from pathlib import Path
from typing import Any

from attrs import frozen

from .config import read_jsonl
from .errors import ConfigError, ExitCode
from .identity import digest
from .model import Execution, Judgment

LABEL_KEYS = ("id", "label", "output", "artifacts", "note")
LABEL_WORDS = {True: True, False: False, "pass": True, "fail": False}
KAPPA_METHOD = ("kappa ± z·SE, SE from Fleiss, Cohen & Everitt (1969), Psychological Bulletin 72(5):323-327, "
                "clipped to [-1, 1]")
RATE_METHOD = "Clopper-Pearson (1934), exact"


@frozen(kw_only=True)
class Label:
    """One human label: the case, the human's verdict, and optionally the output to judge."""

    id: str
    label: bool
    where: str  # "human_labels.jsonl:7"
    output: Any = None
    artifacts: dict | None = None
    has_output: bool = False


def load_labels(path: Path) -> list[Label]:
    """Read a labels file, one object a line; every problem names its line and the fix."""
    labels: list[Label] = []
    for where, obj in read_jsonl(path, what="labels", keys=LABEL_KEYS, example='{"id": "c001", "label": true}',
                                 missing_fix='write one line per case: {"id": "c001", "label": true}'):
        if "label" not in obj:
            raise ConfigError("$.label: missing label", where=where, fix='write {"id": "c001", "label": true}')
        value = obj["label"]
        if isinstance(value, str):
            value = value.strip().casefold()
        if not isinstance(value, (bool, str)) or value not in LABEL_WORDS:
            raise ConfigError(f"label must be true/false or \"pass\"/\"fail\", got {obj['label']!r}", where=where,
                              fix="write true when the criterion holds for the case, false when it does not")
        artifacts = obj.get("artifacts")
        if artifacts is not None and ("output" not in obj or not isinstance(artifacts, dict)):
            raise ConfigError("artifacts must be an object of lists, given beside output", where=where,
                              fix='write "output": {...}, "artifacts": {"context/v1": [{...}]}')
        labels.append(Label(id=obj["id"], label=LABEL_WORDS[value], where=where, output=obj.get("output"),
                            artifacts=artifacts, has_output="output" in obj))
    return labels


@frozen(kw_only=True)
class Table:
    """Judge verdict by human label, counts: ``pp`` judge pass & human pass, ``pf`` judge pass &
    human fail, ``fp`` judge fail & human pass, ``ff`` judge fail & human fail."""

    pp: int
    pf: int
    fp: int
    ff: int

    @property
    def n(self) -> int:
        return self.pp + self.pf + self.fp + self.ff


def cohen_kappa(t: Table) -> float | None:
    """(p_o - p_e) / (1 - p_e); None when p_e = 1 (both raters gave one and the same label throughout)."""
    n = t.n
    if n == 0:
        return None
    observed = (t.pp + t.ff) / n
    expected = ((t.pp + t.pf) * (t.pp + t.fp) + (t.fp + t.ff) * (t.pf + t.ff)) / n ** 2
    return None if expected >= 1.0 else (observed - expected) / (1.0 - expected)


def one_sided(t: Table) -> str | None:
    """Who gave every case the same label (``"humans"``, ``"judge"``), if anyone did."""
    if not (t.pp + t.fp) or not (t.pf + t.ff):
        return "humans"
    if not (t.pp + t.pf) or not (t.fp + t.ff):
        return "judge"
    return None


def kappa_standard_error(t: Table) -> float | None:
    """The large-sample (non-null) standard error of kappa, Fleiss, Cohen & Everitt (1969):

    Var = [Σᵢ pᵢᵢ(1 - (pᵢ. + p.ᵢ)(1 - κ))² + (1 - κ)² Σᵢ≠ⱼ pᵢⱼ(p.ᵢ + pⱼ.)² - (κ - pₑ(1 - κ))²] / (n(1 - pₑ)²),

    rows the judge's verdicts, columns the human labels (statsmodels' ``cohens_kappa().std_kappa``).
    None when kappa is undefined, or when one rater gave every case the same label.
    """
    kappa, n = cohen_kappa(t), t.n
    if kappa is None or one_sided(t):  # kappa is 0 by construction there, and its variance degenerate
        return None
    p = [[t.pp / n, t.pf / n], [t.fp / n, t.ff / n]]
    row = [p[0][0] + p[0][1], p[1][0] + p[1][1]]
    col = [p[0][0] + p[1][0], p[0][1] + p[1][1]]
    expected = row[0] * col[0] + row[1] * col[1]
    term_a = sum(p[i][i] * (1 - (row[i] + col[i]) * (1 - kappa)) ** 2 for i in (0, 1))
    term_b = (1 - kappa) ** 2 * sum(p[i][j] * (col[i] + row[j]) ** 2 for i in (0, 1) for j in (0, 1) if i != j)
    term_c = (kappa - expected * (1 - kappa)) ** 2
    return math.sqrt(max(0.0, term_a + term_b - term_c) / (n * (1 - expected) ** 2))


def kappa_interval(t: Table, confidence: float) -> tuple[float, float] | None:
    """kappa ± z·SE at ``confidence``, clipped to [-1, 1]; None when kappa is undefined."""
    from scipy.special import ndtri

    kappa, se = cohen_kappa(t), kappa_standard_error(t)
    if kappa is None or se is None:
        return None
    z = float(ndtri(0.5 + confidence / 2))
    return max(-1.0, kappa - z * se), min(1.0, kappa + z * se)


def rate(k: int, n: int, confidence: float) -> dict:
    """A proportion with its Clopper–Pearson interval, as stored."""
    from .stats import clopper_pearson

    if n == 0:
        return {"k": 0, "n": 0, "value": None, "low": None, "high": None}
    low, high = clopper_pearson(k, n, confidence)
    return {"k": k, "n": n, "value": k / n, "low": low, "high": high}


def prediction_powered(unlabelled: list[float], judged: list[float], human: list[float],
                       confidence: float) -> dict | None:
    """The human-level pass rate of a run: the judge's rate on its N unlabelled cases, corrected by
    the judge's error on n labelled ones (prediction-powered inference for a mean, Angelopoulos,
    Bates, Fannjiang, Jordan & Zrnic 2023, Science 382(6671):669-674).

    θ = mean(f over unlabelled) - mean(f - y over labelled), SE² = var(f)/N + var(f - y)/n (sample
    variances), interval θ ± z·SE clipped to [0, 1]. None with fewer than two of either.
    """
    from scipy.special import ndtri

    big_n, n = len(unlabelled), len(judged)
    if big_n < 2 or n < 2:
        return None
    f_mean = sum(unlabelled) / big_n
    errors = [f - y for f, y in zip(judged, human)]
    bias = sum(errors) / n
    f_var = sum((f - f_mean) ** 2 for f in unlabelled) / (big_n - 1)
    error_var = sum((e - bias) ** 2 for e in errors) / (n - 1)
    value, se = f_mean - bias, math.sqrt(f_var / big_n + error_var / n)
    z = float(ndtri(0.5 + confidence / 2))
    return {"value": value, "low": max(0.0, value - z * se), "high": min(1.0, value + z * se),
            "standard_error": se, "unlabelled": big_n, "labelled": n}


def run_rate(store: Any, run_id: str, criterion: str, identity: str, labels: list[Label],
             judgments: list[Judgment], confidence: float) -> dict | None:
    """The run's pass rate of the criterion as the gate reads it (judge only), and prediction-powered,
    when the run was judged by this very judge and enough of its cases are labelled and unlabelled."""
    header, summary = store.get_run(run_id)
    if header["evaluators"].get(criterion) is None or digest(header["evaluators"][criterion]) != identity:
        return None
    labelled = {label.id for label in labels}
    unlabelled = [r["judgments"][criterion]["value"] for r in store.run_cases(run_id) if r["id"] not in labelled
                  and r["judgments"].get(criterion, {}).get("status") in ("pass", "fail")]
    pairs = [(j.value, float(label.label)) for label, j in zip(labels, judgments)
             if not label.has_output and j.status in ("pass", "fail")]
    estimate = prediction_powered(unlabelled, [f for f, _ in pairs], [y for _, y in pairs], confidence)
    if estimate is None:
        return None
    metric = summary["metrics"][criterion]
    return {"prediction_powered": estimate, "judge_only": {key: metric[key] for key in ("value", "low", "high",
                                                                                        "observed")}}


def judge_labels(suite: Any, store: Any, spec: Any, pairs: list[tuple[Any, Execution]]) -> tuple[list[Judgment], dict]:
    """The evaluator's judgment of each (case, execution), through the judgment cache the runs use."""
    from .runner import judge

    judgments, figures = judge(pairs, [spec], store, suite.concurrency)
    criterion = spec.evaluator.criterion
    return [j[criterion] for j in judgments], figures.get("usage", {}).get(criterion, {})


def labelled_executions(suite: Any, plugins: Any, store: Any, labels: list[Label],
                        run_id: str | None) -> tuple[list[tuple[Any, Execution]], str | None]:
    """Each label's case and the execution to judge: the label's own output, or the run's record."""
    from .errors import ArtifactError

    cases = {case.id: case for case in suite.cases}
    for label in labels:
        if label.id not in cases:
            close = difflib.get_close_matches(label.id, cases, n=1)
            raise ConfigError(f"case {label.id!r} is not in {suite.config_path.name}'s cases", where=label.where,
                              fix=f"did you mean {close[0]!r}?" if close else "label cases of the suite")
    records: dict[str, dict] = {}
    if any(not label.has_output for label in labels):
        if run_id is not None:
            run_id = store.resolve_run(run_id)
        else:
            runs = [h["id"] for h in store.list_runs() if h.get("config") == suite.config_path.name]
            if not runs:
                raise ConfigError(f"no run of {suite.config_path.name} to take the outputs from",
                                  fix="run `oloproof run` first, or give every label line an output")
            run_id = runs[-1]
        records = {record["id"]: record for record in store.run_cases(run_id)}
    pairs = []
    for label in labels:
        if label.has_output:
            artifacts = {}
            for kind, items in (label.artifacts or {}).items():
                entry = plugins.artifacts.get(kind, where=label.where)
                try:
                    made = entry.factory()
                    artifacts[kind] = tuple(made.to_data(made.from_data(item)) for item in items)
                except (ArtifactError, TypeError, KeyError, AttributeError) as exc:
                    raise ConfigError(f"malformed {kind} in artifacts: {exc}", where=label.where,
                                      fix=f"write {kind} records as a system records them (a list of objects)") from None
            pairs.append((cases[label.id], Execution(output=label.output, artifacts=artifacts)))
        elif label.id not in records:
            raise ConfigError(f"case {label.id!r} is not in run {run_id}", where=label.where,
                              fix="label cases of that run, pass another --run, or give the output in the line")
        else:
            pairs.append((cases[label.id], Execution.from_data(records[label.id])))
    return pairs, run_id


def validate_judge(suite: Any, plugins: Any, store: Any, criterion: str, labels_path: Path,
                   run_id: str | None = None) -> tuple[list[str], ExitCode, str, dict]:
    """Judge the labelled cases, compare, store the validation; (lines, exit code, id, record)."""
    specs = {spec.evaluator.criterion: spec for spec in suite.evaluators}
    if criterion not in specs:
        close = difflib.get_close_matches(criterion, specs, n=1)
        raise ConfigError(f"no evaluator of {suite.config_path.name} defines criterion {criterion!r}",
                          fix=f"did you mean {close[0]!r}?" if close else f"use one of: {', '.join(specs)}")
    spec = specs[criterion]
    if spec.evaluator.metric != "proportion":
        raise ConfigError(f"criterion {criterion!r} is summarised by {spec.evaluator.metric!r}; validation compares "
                          "pass/fail verdicts with pass/fail labels", fix="validate a pass/fail criterion")
    labels = load_labels(labels_path)
    pairs, run_id = labelled_executions(suite, plugins, store, labels, run_id)
    judgments, usage = judge_labels(suite, store, spec, pairs)
    cells: Counter = Counter()
    missing: Counter = Counter()
    excluded: Counter = Counter()
    for label, judgment in zip(labels, judgments):
        if judgment.status in ("pass", "fail"):
            cells[("p" if judgment.status == "pass" else "f") + ("p" if label.label else "f")] += 1
        elif judgment.status == "score":
            raise ConfigError(f"criterion {criterion!r} gave a score for case {label.id!r}, not pass or fail",
                              fix="validate a pass/fail criterion")
        else:
            (missing if judgment.status == "missing" else excluded)[judgment.reason or "unknown"] += 1
    table = Table(pp=cells["pp"], pf=cells["pf"], fp=cells["fp"], ff=cells["ff"])
    if table.n == 0:  # nothing to compare: no validation is stored, so none can let a rule gate
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted((missing + excluded).items()))
        raise ConfigError(f"none of the {len(labels)} labelled cases has a pass/fail judgment of {criterion!r} to "
                          f"compare with its label ({reasons})",
                          fix="label cases the judge can judge: cases of the run with an output, or give the output "
                              "in the label line")
    confidence = suite.policy.confidence_level if suite.policy is not None else 0.95
    kappa = cohen_kappa(table)
    interval = kappa_interval(table, confidence)
    record = {
        "kind": "judge_validation", "criterion": criterion, "identity": digest(spec.identity),
        "evaluator": spec.identity, "labels": {"file": labels_path.name, "count": len(labels),
                                               "sha256": digest([(x.id, x.label, x.output, x.artifacts) for x in labels])},
        "run": run_id, "outputs_from_labels": sum(1 for x in labels if x.has_output),
        "n": table.n, "table": {"judge_pass_human_pass": table.pp, "judge_pass_human_fail": table.pf,
                                "judge_fail_human_pass": table.fp, "judge_fail_human_fail": table.ff},
        "missing": dict(sorted(missing.items())), "excluded": dict(sorted(excluded.items())),
        "confidence_level": confidence,
        "agreement": rate(table.pp + table.ff, table.n, confidence),
        "kappa": kappa, "kappa_low": interval[0] if interval else None, "kappa_high": interval[1] if interval else None,
        "kappa_standard_error": kappa_standard_error(table), "one_sided": one_sided(table) if table.n else None,
        "true_positive_rate": rate(table.pp, table.pp + table.fp, confidence),
        "true_negative_rate": rate(table.ff, table.pf + table.ff, confidence),
        "methods": {"rates": RATE_METHOD, "kappa": KAPPA_METHOD},
    }
    if run_id is not None:
        record["run_rate"] = run_rate(store, run_id, criterion, record["identity"], labels, judgments, confidence)
    met = None
    if suite.policy is not None:
        need = suite.policy.judge_validation
        met = table.n >= need.min_cases and kappa is not None and kappa >= need.min_kappa
        record["requirement"] = {"min_kappa": need.min_kappa, "min_cases": need.min_cases, "met": met}
    record["lines"] = render(record, spec)
    object_id = "sha256:" + digest(record)
    store.put_object("judge_validation", object_id, record)
    lines = [*record["lines"], f"Validation: {object_id}"]
    if usage:
        from .report import usage_line

        lines.append(usage_line(criterion, usage))
    return lines, ExitCode.BLOCKED if met is False else ExitCode.OK, object_id, record


def render(record: dict, spec: Any) -> list[str]:
    """The report: the 2×2 table, the measures with intervals, the methods and the requirement."""
    from .report import pct, table
    from .stats import ceil_to, floor_to

    extra = spec.identity.get("extra") or {}
    about = " · ".join(str(x) for x in (spec.type, extra.get("provider"), extra.get("model"),
                                        extra.get("prompt_version") and f"prompt {extra['prompt_version']}") if x)
    counts = record["table"]
    lost = sum(record["missing"].values()) + sum(record["excluded"].values())
    reasons = ", ".join(f"{reason} {count}" for reason, count in {**record["missing"], **record["excluded"]}.items())
    sources = [f"run {record['run']} ({record['labels']['count'] - record['outputs_from_labels']} cases)"] \
        if record["run"] else []
    if record["outputs_from_labels"]:
        sources.append(f"the labels file ({record['outputs_from_labels']} cases)")
    out = [f"Judge validation of {record['criterion']} ({about})",
           f"Labels: {record['labels']['file']} · {record['labels']['count']} labelled · {record['n']} compared · "
           f"{lost} not judged" + (f" ({reasons})" if reasons else ""),
           f"Outputs: {', '.join(sources)}", ""]
    out += table(["", "human pass", "human fail"],
                 [["judge pass", str(counts["judge_pass_human_pass"]), str(counts["judge_pass_human_fail"])],
                  ["judge fail", str(counts["judge_fail_human_pass"]), str(counts["judge_fail_human_fail"])]])

    def percent(r: dict) -> list[str]:
        if r["value"] is None:
            return ["—", "—", "0 / 0"]
        return [f"{100 * r['value']:.1f}%", f"[{floor_to(100 * r['low'], 1):.1f}%, {ceil_to(100 * r['high'], 1):.1f}%]",
                f"{r['k']} / {r['n']}"]

    kappa = record["kappa"]
    if kappa is None:
        kappa_cells = ["undefined", "—", f"n {record['n']}"]
    elif record["kappa_low"] is None:
        kappa_cells = [f"{kappa:.3f}", "—", f"n {record['n']}"]
    else:
        kappa_cells = [f"{kappa:.3f}", f"[{floor_to(record['kappa_low'], 3):.3f}, "
                       f"{ceil_to(record['kappa_high'], 3):.3f}]", f"n {record['n']}"]
    out += table(["measure", "estimate", f"{pct(record['confidence_level'])} interval", "counts"],
                 [["agreement", *percent(record["agreement"])], ["Cohen's kappa", *kappa_cells],
                  ["true-positive rate", *percent(record["true_positive_rate"])],
                  ["true-negative rate", *percent(record["true_negative_rate"])]])
    run_rate_ = record.get("run_rate")
    if run_rate_:
        naive, ppi = run_rate_["judge_only"], run_rate_["prediction_powered"]
        out.append(f"Pass rate of {record['criterion']} in run {record['run']}:")
        out += table(["estimate of", "estimate", f"{pct(record['confidence_level'])} interval", "from"],
                     [["judge only (the gate)", *percent({**naive, "k": naive["observed"], "n": 0})[:2],
                       f"{naive['observed']} judged"],
                      ["prediction-powered", *percent({**ppi, "k": 0, "n": 0})[:2],
                       f"{ppi['unlabelled']} judged + {ppi['labelled']} labelled"]])
    out.append(f"Intervals: rates {RATE_METHOD}; {KAPPA_METHOD}.")
    if run_rate_:
        out.append("Prediction-powered: the judge's rate on the unlabelled cases minus its mean error on the "
                   "labelled ones, Angelopoulos et al. (2023), Science 382(6671):669-674; the gate decides on "
                   "the judge-only interval.")
    if kappa is None:
        out.append("Kappa is undefined: the judge and the humans each gave one and the same label to every case.")
    elif record["one_sided"]:
        who = "the humans gave every case the same label" if record["one_sided"] == "humans" else \
            "the judge gave every case the same verdict"
        out.append(f"Kappa is 0 by construction and has no interval: {who}; label cases of both kinds.")
    elif kappa == 1.0:
        out.append("Perfect agreement: the large-sample kappa interval collapses to a point; read the agreement "
                   "interval for the uncertainty.")
    requirement = record.get("requirement")
    if requirement is None:
        out.append("Requirement: none (the suite has no policy)")
    else:
        verdict = "met: rules on this criterion may gate" if requirement["met"] else \
            "not met: rules on this criterion stay MANUAL_REVIEW (judge_not_validated)"
        out.append(f"Requirement (policy judge_validation: min_kappa {requirement['min_kappa']:g}, "
                   f"min_cases {requirement['min_cases']}): {verdict}")
    if not getattr(spec.evaluator, "judge", False):
        out.append(f"Note: {spec.type} is not an LLM judge; the gate does not need this validation.")
    return out
