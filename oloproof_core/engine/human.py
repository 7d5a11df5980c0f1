"""The human labels that apply to a run, and the human-level evidence of each judge criterion.

Two sources, per judge criterion:

- labels kept in the store (``oloproof label``): a label applies to the case's answer it was made
  on (the digest of output and artifacts), in any run that gave that same answer;
- the labels file a policy names (``labels: {grounded: human_labels.jsonl}``, the file
  ``oloproof judge validate`` reads): a line applies to its case's answer in the run being gated;
  a line that carries its own ``output`` is about another answer and is left out.

A stored label of a case (a skip too) takes the place of the file's. Labels of cases whose judge
verdict is missing or excluded are not counted (they belong to no stratum).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from oloproof_core.statistics.human_level import HumanLevelMetric, Labelled, human_estimate, human_interval

#: (case id, execution digest, {criterion: judge status}) of each case of a run, in case order
CaseVerdicts = tuple[str, str, Mapping[str, str]]


@frozen(kw_only=True)
class Evidence:
    """A judge criterion's labels on a run: the table by judge verdict, and the run's verdicts."""

    criterion: str
    labelled: Labelled
    passes: int
    judged: int
    stored: int = 0
    from_file: int = 0

    def metric(self) -> HumanLevelMetric:
        return HumanLevelMetric(self.labelled, self.judged)

    def record(self, confidence: float) -> dict:
        low, high = human_interval(self.passes, self.judged, self.labelled, confidence)
        t = self.labelled
        return {"labels": t.n, "stored": self.stored, "from_file": self.from_file,
                "table": {"judge_pass_human_pass": t.pp, "judge_pass_human_fail": t.pf,
                          "judge_fail_human_pass": t.fp, "judge_fail_human_fail": t.ff},
                "judge_passes": self.passes, "judged": self.judged,
                "value": human_estimate(self.passes, self.judged, t), "low": low, "high": high}


def file_labels(policy: Any, base: Path) -> dict[str, dict[str, bool]]:
    """criterion -> case id -> label, from the labels files the policy names."""
    from oloproof_core.config.labels import load_labels

    out: dict[str, dict[str, bool]] = {}
    for criterion, name in (getattr(policy, "labels", None) or {}).items():
        out[criterion] = {label.id: label.label for label in load_labels(base / name) if not label.has_output}
    return out


def human_evidence(criteria: Sequence[str], cases: Sequence[CaseVerdicts], store: Any,
                   from_files: Mapping[str, Mapping[str, bool]]) -> dict[str, Evidence]:
    """The evidence of each judge criterion that has at least one label on a case it judged."""
    from oloproof_core.storage.labels import stored_labels

    out = {}
    for criterion in criteria:
        stored = stored_labels(store, criterion)
        filed = from_files.get(criterion, {})
        cells = {"pp": 0, "pf": 0, "fp": 0, "ff": 0}
        passes = judged = n_stored = n_file = 0
        for case_id, execution, statuses in cases:
            status = statuses.get(criterion)
            if status not in ("pass", "fail"):
                continue
            judged += 1
            passes += status == "pass"
            record = stored.get((criterion, case_id, execution))
            if record is not None:
                if record["verdict"] == "skip":
                    continue
                label, n_stored = record["verdict"] == "pass", n_stored + 1
            elif case_id in filed:
                label, n_file = filed[case_id], n_file + 1
            else:
                continue
            cells[status[0] + ("p" if label else "f")] += 1
        if n_stored + n_file:
            out[criterion] = Evidence(criterion=criterion, labelled=Labelled(**cells), passes=passes, judged=judged,
                                      stored=n_stored, from_file=n_file)
    return out
