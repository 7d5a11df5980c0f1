"""``oloproof judge validate``: how far a judge agrees with human labels, stored as the evidence
the gate requires before a rule on a judge's criterion may gate.

The labels file has one JSON object a line: ``id`` (a case of the suite), ``label`` (true or
"pass" when the human says the criterion holds, false or "fail" otherwise), and optionally
``output`` with ``artifacts`` (judge this output instead of a run's) and ``note``. The judge
reads the recorded execution of the case in ``--run`` (default: ``latest``, the newest run of the project).

Agreement, the true-positive rate (the judge passes what the human passes) and the true-negative
rate (the judge fails what the human fails) get Clopper–Pearson intervals; Cohen's kappa gets a
conservative finite-sample interval whose lower bound the policy's requirement reads (the
statistics are in ``agreement.py``, the report in ``report.py``).
docs/judges.md shows the arithmetic.
"""

from __future__ import annotations

import difflib
from collections import Counter
from pathlib import Path
from typing import Any


from oloproof_core.statistics.agreement import (
    KAPPA_LARGE_SAMPLE_METHOD, KAPPA_METHOD, RATE_METHOD, Table, cohen_kappa, kappa_bounds, kappa_interval,
    kappa_standard_error, one_sided, prediction_powered, rate,
)
from oloproof_core.config.labels import LABEL_KEYS, LABEL_WORDS, Label, load_labels  # noqa: F401 - re-exported
from oloproof_core.model.errors import ConfigError, ExitCode
from oloproof_core.decisions.gate import requirement_met
from oloproof_core.model.identity import digest
from oloproof_core.model.records import Execution, Judgment
from oloproof_core.storage.stores import resolve_reference

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
    from oloproof_core.engine.judging import judge

    judgments, figures = judge(pairs, [spec], store, suite.concurrency, suite_specs=suite.evaluators)
    criterion = spec.evaluator.criterion
    return [j[criterion] for j in judgments], figures.get("usage", {}).get(criterion, {})


def labelled_executions(suite: Any, plugins: Any, store: Any, labels: list[Label],
                        run_id: str | None) -> tuple[list[tuple[Any, Execution]], str | None]:
    """Each label's case and the execution to judge: the label's own output, or the run's record."""
    from oloproof_core.model.errors import ArtifactError

    cases = {case.id: case for case in suite.cases}
    for label in labels:
        if label.id not in cases:
            close = difflib.get_close_matches(label.id, cases, n=1)
            raise ConfigError(f"case {label.id!r} is not in {suite.config_path.name}'s cases", where=label.where,
                              fix=f"did you mean {close[0]!r}?" if close else "label cases of the suite")
    records: dict[str, dict] = {}
    if any(not label.has_output for label in labels):
        if run_id is None and not store.list_runs():
            raise ConfigError("no run to take the outputs from",
                              fix="run `oloproof run` first, or give every label line an output")
        run_id = resolve_reference(store, run_id or "latest")  # latest: the newest run of the project, as everywhere
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
    bounds, large_sample = kappa_bounds(table, confidence), kappa_interval(table, confidence)
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
        "kappa": kappa, "kappa_bounds": list(bounds) if bounds else None,
        "kappa_large_sample": list(large_sample) if large_sample else None,
        "kappa_standard_error": kappa_standard_error(table), "one_sided": one_sided(table) if table.n else None,
        "true_positive_rate": rate(table.pp, table.pp + table.fp, confidence),
        "true_negative_rate": rate(table.ff, table.pf + table.ff, confidence),
        "methods": {"rates": RATE_METHOD, "kappa": KAPPA_METHOD, "kappa_large_sample": KAPPA_LARGE_SAMPLE_METHOD},
    }
    need = suite.policy.judge_validation if suite.policy is not None else None
    from oloproof_core.statistics.admission import BIAS_METHOD, admit_by_bias

    limits = (need.max_bias, need.max_false_pass) if need is not None else (0.10, 0.5)
    record["bias_admission"] = {**admit_by_bias(table.pp, table.pf, table.fp, table.ff, confidence, *limits),
                                "max_bias": limits[0], "max_false_pass": limits[1], "method": BIAS_METHOD}
    if run_id is not None:
        record["run_rate"] = run_rate(store, run_id, criterion, record["identity"], labels, judgments, confidence)
    met = None
    if suite.policy is not None:
        need = suite.policy.judge_validation
        met = requirement_met(record, need)
        record["requirement"] = {"min_kappa": need.min_kappa, "min_cases": need.min_cases, "met": met}
        if need.admit_by != "kappa":
            record["requirement"].update(admit_by=need.admit_by, max_bias=need.max_bias,
                                         max_false_pass=need.max_false_pass)
    from oloproof_core.workflows.validation import render_validation

    record["lines"] = render_validation(record, spec)
    object_id = "sha256:" + digest(record)
    store.put_object("judge_validation", object_id, record)
    lines = [*record["lines"], f"Validation: {object_id}"]
    if usage:
        from oloproof_core.statistics.display import usage_line

        lines.append(usage_line(criterion, usage))
    return lines, ExitCode.BLOCKED if met is False else ExitCode.OK, object_id, record


def render_validation(record: dict, spec: Any) -> list[str]:
    """The report of ``oloproof judge validate``: the 2×2 table, the measures with intervals, the
    methods and the requirement."""
    from oloproof_core.statistics.agreement import KAPPA_METHOD, RATE_METHOD
    from oloproof_core.statistics.display import fixed, pct, percent, percent_bounds, percent_of, table
    from oloproof_core.statistics.intervals import ceil_to, floor_to

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

    def rate_cells(r: dict) -> list[str]:
        if r["value"] is None:
            return ["—", "—", "0 / 0"]
        return [percent_of(r["k"], r["n"]), percent_bounds(r["low"], r["high"]), f"{r['k']} / {r['n']}"]

    kappa, bounds = record["kappa"], record.get("kappa_bounds")
    if kappa is None:
        kappa_cells = ["undefined", "—", f"n {record['n']}"]
    elif bounds is None:
        kappa_cells = [fixed(kappa, 3), "—", f"n {record['n']}"]
    else:
        kappa_cells = [fixed(kappa, 3), f"[{floor_to(bounds[0], 3):.3f}, {ceil_to(bounds[1], 3):.3f}]",
                       f"n {record['n']}"]
    level = pct(record["confidence_level"])
    out += table(["measure", "estimate", f"{level} interval", "counts"],
                 [["agreement", *rate_cells(record["agreement"])], ["Cohen's kappa", *kappa_cells],
                  ["true-positive rate", *rate_cells(record["true_positive_rate"])],
                  ["true-negative rate", *rate_cells(record["true_negative_rate"])]])
    bias = record.get("bias_admission")
    if bias and bias["bias"] is not None:
        low, high = bias["bias_bounds"]
        out.append(f"Bias (judge pass rate - human pass rate): {100 * bias['bias']:+.1f} points "
                   f"[{floor_to(100 * low, 1):+.1f}, {ceil_to(100 * high, 1):+.1f}]; false-pass rate "
                   f"(judge passes what people fail) at most {ceil_to(100 * bias['false_pass_high'], 1):.1f}%")
    run_rate = record.get("run_rate")
    if run_rate:
        naive, ppi = run_rate["judge_only"], run_rate["prediction_powered"]
        labels = ppi["labels"]
        out.append(f"Pass rate of {record['criterion']} in run {record['run']}:")
        out += table(["estimate of", "estimate", f"{level} interval", "from"],
                     [["judge only", percent(naive["value"]), percent_bounds(naive["low"], naive["high"]),
                       f"{naive['observed']} judged"],
                      ["human labels only", *rate_cells(labels)[:2], f"{labels['n']} labelled"],
                      ["prediction-powered", percent(ppi["value"]), "—",
                       f"{ppi['unlabelled']} judged + {ppi['labelled']} labelled"]])
    out.append(f"Intervals: rates {RATE_METHOD}; {KAPPA_METHOD}.")
    if run_rate:
        out.append("Human level: the labels' own Clopper-Pearson interval. Prediction-powered (Angelopoulos et al. "
                   "2023, Science 382(6671):669-674): the judge's rate on the unlabelled cases minus its mean error "
                   "on the labelled ones, an estimate without an interval (its large-sample interval under-covers "
                   "at these sizes). Without labels of the run the gate decides on the judge-only interval; with them, on "
                   "the human-level interval `oloproof run` prints.")
    if kappa is None:
        out.append("Kappa is undefined: the judge and the humans each gave one and the same label to every case.")
    elif record["one_sided"]:
        who = "the humans gave every case the same label" if record["one_sided"] == "humans" else \
            "the judge gave every case the same verdict"
        out.append(f"Kappa is 0 by construction and has no interval: {who}; label cases of both kinds.")
    requirement = record.get("requirement")
    if requirement is None:
        out.append("Requirement: none (the suite has no policy)")
    else:
        verdict = "met: without labels of a run, rules on this criterion may gate on the judge's rate" \
            if requirement["met"] else \
            "not met: without labels of a run, rules on this criterion stay MANUAL_REVIEW (judge_not_validated)"
        if requirement.get("admit_by") == "bias":
            out.append(f"Requirement (policy judge_validation: bias within ±{100 * requirement['max_bias']:g} points, "
                       f"false-pass rate at most {100 * requirement['max_false_pass']:g}%, min_cases "
                       f"{requirement['min_cases']}): {verdict}")
        else:
            out.append(f"Requirement (policy judge_validation: lower bound of kappa at least {requirement['min_kappa']:g}, "
                       f"min_cases {requirement['min_cases']}): {verdict}")
    if not getattr(spec.evaluator, "judge", False):
        out.append(f"Note: {spec.type} is not an LLM judge; the gate does not need this validation.")
    return out
