"""Diagnose: re-execute a run's failed cases under an intervention, beside a control.

Labels describe the selected cases only, as associations between a failure and a stage under
an intervention; the output never claims a cause ("Implicated", "Candidate experiment" at most).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .errors import ArtifactError, CaseMissing, ConfigError
from .identity import canonical, digest
from .model import Case, Execution, Judgment
from .recording import call_with_recorder
from .relevance import latest, relevant_units, unit_key
from .execution import to_execution
from .runner import new_run_id

ORDER = ("RETRIEVAL_MISS", "RANKED_OUT", "CONTEXT_ASSEMBLY_LOSS", "GENERATION_FAILURE", "UNRESOLVED")
DESCRIPTION = {
    "RETRIEVAL_MISS": "recovered; no relevant evidence was retrieved",
    "RANKED_OUT": "recovered; relevant evidence was retrieved below top-k",
    "CONTEXT_ASSEMBLY_LOSS": "recovered; relevant evidence within top-k was left out of the context",
    "GENERATION_FAILURE": "still failed with the gold context",
}
UNRESOLVED_WHY = {  # in the order the summary lists them
    "intervention_unsupported": "the system is not staged, so no case was re-executed",
    "passed_in_control": "passed when re-executed unchanged, so it was unstable, not diagnosed",
    "relevant_in_context": "recovered, though relevant evidence was already in the context",
    "no_relevance_labels": "recovered, but without relevance labels no stage can be implicated",
    "no_gold_context_diagnosis": "no gold-context diagnosis of this run labels it yet",
}
FACTORS = {  # label -> (implicated factor, candidate experiments); the order breaks no tie, all are listed
    "CONTEXT_ASSEMBLY_LOSS": ("context budget", ("a larger token budget", "smaller chunks")),
    "RANKED_OUT": ("ranking below top-k", ("a larger top-k", "a reranker")),
    "RETRIEVAL_MISS": ("retrieval", ("query expansion or rewriting", "a different retriever or index")),
    "GENERATION_FAILURE": ("generation", ("a prompt or model change",)),
}
NO_GOLD_FIX = ("declare the passages that would have answered the case in its `expected.gold_context`, as a "
               "list of `{doc_id, text}` objects; an intervention needs them to tell a retrieval failure from a "
               "generation one")
HYPOTHESIS = "This is a hypothesis to test, not an established cause."


def _cases(n: int) -> str:
    return f"{n} failed case" if n == 1 else f"{n} failed cases"


def best_position(case: Case, record: dict) -> int | str:
    """The best relevant position in the run's recorded retrieval: a number (the candidate's own
    place, the one top_k cuts at), ``none`` (not retrieved) or ``unknown`` (no labels, or nothing
    recorded)."""
    relevant = relevant_units(case)
    retrieval = latest(Execution.from_data(record), "retrieval/v1")
    if not relevant or retrieval is None:
        return "unknown"
    for position, passage in enumerate(retrieval.get("candidates", ()), 1):
        if unit_key(passage, "doc") in relevant:
            return position
    return "none"


def gold_label(case: Case, record: dict, top_k: int, recovered: bool, control_passed: bool) -> tuple[str, str]:
    """The label and reason of one case: the control first, recovery second, position last."""
    if control_passed:
        return "UNRESOLVED", "passed_in_control"
    if not recovered:
        return "GENERATION_FAILURE", "fails_with_gold_context"
    position = best_position(case, record)
    if position == "unknown":
        return "UNRESOLVED", "no_relevance_labels"
    if position == "none":
        return "RETRIEVAL_MISS", "relevant_not_retrieved"
    if position > top_k:
        return "RANKED_OUT", "relevant_ranked_below_top_k"
    context = latest(Execution.from_data(record), "context/v1") or {}
    relevant = relevant_units(case) or {}
    if any(unit_key(item, "doc") in relevant for item in context.get("items", ())):
        return "UNRESOLVED", "relevant_in_context"
    return "CONTEXT_ASSEMBLY_LOSS", "relevant_dropped_from_context"


class Diagnosis:
    """One ``oloproof diagnose`` invocation over a stored run."""

    def __init__(self, suite: Any, plugins: Any, store: Any, run_id: str, criterion: str):
        self.suite, self.plugins, self.store, self.run_id, self.criterion = suite, plugins, store, run_id, criterion
        self.header, _ = store.get_run(run_id)
        if self.header.get("parent"):
            raise ConfigError(f"{run_id} is the {self.header.get('role')} run of a diagnosis of "
                              f"{self.header['parent']}, not a run of the suite",
                              fix=f"diagnose {self.header['parent']}")
        if criterion not in self.header["evaluators"]:
            raise ConfigError(f"run {run_id} has no criterion {criterion!r}",
                              fix=f"use one of: {', '.join(self.header['evaluators'])}")
        system = suite.system
        if canonical(system.identity) != canonical(self.header["system"]["identity"]):
            raise ConfigError(f"the system of {run_id} has changed since it ran (its code or settings), and diagnose "
                              "re-executes that system", fix="run `oloproof run` again and diagnose the new run")
        spec = next((s for s in suite.evaluators if s.evaluator.criterion == criterion), None)
        if spec is None or canonical(spec.identity) != canonical(self.header["evaluators"][criterion]):
            raise ConfigError(f"the evaluator of {criterion!r} has changed since {run_id} ran (or left the suite), "
                              "and diagnose judges the re-executed cases with it",
                              fix="run `oloproof run` again and diagnose the new run")
        self.evaluator = spec.evaluator
        self.records = list(store.run_cases(run_id))
        self.cases = {c.id: c for c in suite.cases}
        self.pending: list[tuple[dict, list, dict]] = []  # child runs to store with the diagnosis

    # -- re-execution ----------------------------------------------------------------------

    def child_run(self, role: str, intervention: Any, selected: list[dict], apply: Any) -> tuple[str, dict]:
        """Re-execute the selected cases (``apply`` is the intervention or its control), judge
        them on the criterion and store the child run. Returns its id and case -> passed.

        The child run is stored by :meth:`run`, together with the diagnosis that names it.
        Nothing here reads the execution cache, and the interventions generate uncached: a
        control served from a cache would say nothing about stability.
        """
        run_id = new_run_id()
        system = self.suite.system

        def one(record: dict) -> tuple[dict, Execution, Judgment]:
            case = self.cases[record["id"]]
            start = time.perf_counter()
            try:
                output, recorder = call_with_recorder(lambda r: apply(system, case, record, r), case)
                canonical(output)  # stored as JSON, like any run's output
            except (ConfigError, ArtifactError):
                raise
            except CaseMissing as exc:
                execution = Execution(missing=exc.reason)
                return record, execution, Judgment.missing(exc.reason)
            except Exception as exc:  # noqa: BLE001 - a re-execution failing: that case is missing
                execution = Execution(missing=f"error: {type(exc).__name__}: {exc}")
                return record, execution, Judgment.missing(execution.missing)
            execution = to_execution(output, recorder, case, system, self.plugins, time.perf_counter() - start)
            try:
                return record, execution, self.evaluator.evaluate(case, execution)
            except Exception as exc:  # noqa: BLE001 - as in a run: an evaluator failing leaves the judgment missing
                return record, execution, Judgment.missing(f"evaluator_error: {type(exc).__name__}: {exc}")

        workers = min(self.suite.concurrency, getattr(system, "concurrency", None) or self.suite.concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="oloproof-diagnose") as pool:
            results = list(pool.map(one, selected))
        header = {"id": run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "system": self.header["system"], "config": self.header.get("config"),
                  "evaluators": {self.criterion: self.header["evaluators"][self.criterion]},
                  "metrics": {self.criterion: self.header["metrics"][self.criterion]},
                  "cases": len(selected), "state": "DIAGNOSTIC/COMPLETE", "parent": self.run_id,
                  "role": role, "intervention": intervention.name, "slices": [], "min_slice_support": 0}
        rows = [{"id": r["id"], "case": r["case"], **e.to_data(), "judgments": {self.criterion: j.to_data()}}
                for r, e, j in results]
        # stored with the diagnosis, in one transaction: a diagnosis that dies leaves no child run
        self.pending.append((header, rows, {"state": header["state"], "gate": None, "metrics": {}, "decisions": [],
                                           "caches": {}}))
        return run_id, {r["id"]: j.status == "pass" for r, _, j in results}

    def latest_gold(self) -> tuple[str, dict] | None:
        """The run's latest gold-context diagnosis on this criterion that re-executed something."""
        found = [(i, r) for i, r in self.store.list_objects("diagnosis")
                 if r.get("run") == self.run_id and r.get("intervention") == "gold-context"
                 and r.get("criterion") == self.criterion and r.get("children")]
        return found[-1] if found else None

    # -- the diagnosis ---------------------------------------------------------------------

    def run(self, intervention: Any) -> list[str]:
        """Diagnose, store the diagnosis, and return the lines ``oloproof diagnose`` prints."""
        supported = intervention.supports(self.suite.system)
        if supported:  # bad options stop the command before anything is re-executed
            intervention.check(self.suite.system)
        failed = [r for r in self.records if r["judgments"].get(self.criterion, {}).get("status") == "fail"]
        selected = [r for r in failed if (self.cases.get(r["id"]) or _case(r)).expected.get("gold_context")]
        excluded = [r for r in failed if r not in selected]
        for r in selected:
            if r["id"] not in self.cases:
                raise ConfigError(f"case {r['id']!r} of {self.run_id} is no longer in the case file",
                                  fix="diagnose a run of the current cases")
        n = len(selected)
        lines = [f"Selected: {_cases(n)} with gold context (observed; no population claim)"]
        if excluded:
            lines.append(f"Excluded: {_cases(len(excluded))}, no_gold_context - {NO_GOLD_FIX}")
        record = {"kind": "diagnosis", "run": self.run_id, "intervention": intervention.name,
                  "label": intervention.label, "criterion": self.criterion,
                  "excluded": [{"id": r["id"], "reason": "no_gold_context"} for r in excluded]}
        cases_out: list[dict] = []
        children: list[tuple[str, str]] = []
        if not supported:
            for r in selected:
                cases_out.append({"id": r["id"], "label": "UNRESOLVED", "reason": "intervention_unsupported",
                                  "strength": "none", "position": best_position(self.cases[r["id"]], r)})
            lines += label_lines(cases_out, n)
        elif n:
            run_id, passed = self.child_run(intervention.label, intervention, selected, intervention.apply)
            control_id, control_passed = self.child_run(intervention.control_label, intervention, selected,
                                                        intervention.control)
            lines.append(f"Control: {sum(control_passed.values())} of {n} passed when re-executed without "
                         "the intervention")
            lines.append(f"Recovered under {intervention.label}: {sum(passed.values())} of {n}")
            if intervention.labels_by_recovery:
                cases_out = self.labelled(selected, passed, control_passed)
                lines += label_lines(cases_out, n) + implication_lines(cases_out)
            else:
                cases_out, more, children = self.confirmed(intervention, selected, passed, control_passed)
                lines += more
            children += [(intervention.label, run_id), (intervention.control_label, control_id)]
        record.update(cases=sorted(cases_out, key=lambda c: c["id"]), children=[list(c) for c in children],
                      summary=lines)
        record["lines"] = inspect_lines(record, intervention)
        object_id = "sha256:" + digest(record)
        batch = getattr(self.store, "batch", None)  # a store without batches writes them one by one
        with batch() if batch is not None else contextlib.nullcontext():
            for header, rows, summary in self.pending:
                self.store.save_run(header, rows, summary)
            self.store.put_object("diagnosis", object_id, record)
        lines.append(f"Diagnosis {object_id}")
        if children:
            lines.append("Child runs: " + ", ".join(f"{role} {run}" for role, run in children))
        lines.append(f"Cases: oloproof inspect {object_id}")
        return lines

    def labelled(self, selected: list[dict], passed: dict, control_passed: dict) -> list[dict]:
        """Labels from this intervention's recoveries (gold context)."""
        out = []
        for r in selected:
            case = self.cases[r["id"]]
            label, reason = gold_label(case, r, self.suite.system.top_k, passed[r["id"]], control_passed[r["id"]])
            strength = "none" if label == "UNRESOLVED" else (
                "intervention_recovery" if passed[r["id"]] else "intervention_non_recovery")
            out.append({"id": r["id"], "label": label, "reason": reason, "strength": strength,
                        "position": best_position(case, r), "recovered": passed[r["id"]],
                        "control_passed": control_passed[r["id"]]})
        return out

    def confirmed(self, intervention: Any, selected: list[dict], passed: dict,
                  control_passed: dict) -> tuple[list[dict], list[str], list[tuple[str, str]]]:
        """Carry the labels of the run's latest gold-context diagnosis forward, and count the
        cases of the label this intervention tests (``confirms``) that it recovered."""
        gold = self.latest_gold()
        carried = {c["id"]: c for c in gold[1]["cases"]} if gold else {}
        lines = []
        target = getattr(intervention, "confirms", None)
        if target:
            tested = [i for i, c in carried.items() if c["label"] == target]
            # a recovery that the control matched is no confirmation
            confirmed = [i for i in tested if passed.get(i) and not control_passed.get(i)]
            lines.append(f"Confirmed under {intervention.label}: {len(confirmed)} of {len(tested)} {target} "
                         "cases also recovered")
        cases_out = []
        for r in selected:
            c = dict(carried.get(r["id"]) or {"label": "UNRESOLVED", "reason": "no_gold_context_diagnosis",
                                              "strength": "none", "position": best_position(self.cases[r["id"]], r)})
            c.update(id=r["id"], recovered=passed[r["id"]], control_passed=control_passed[r["id"]])
            cases_out.append(c)
        if gold:
            gold_cases = gold[1]["cases"]
            done = sum(1 for c in gold_cases if c.get("recovered"))
            lines.append(f"Labels from gold context (diagnosis {gold[0]}): {done} of {len(gold_cases)} recovered")
            lines += label_lines(gold_cases, len(gold_cases))
            return cases_out, lines, [tuple(pair) for pair in gold[1]["children"]]
        lines.append("Labels from gold context: none yet; run `oloproof diagnose RUN_ID "
                     f"--intervention gold-context --criterion {self.criterion}` first")
        return cases_out, lines, []


def _case(record: dict) -> Case:
    data = record["case"]
    return Case(id=data["id"], input=data["input"], expected=data.get("expected", {}),
                metadata=data.get("metadata", {}))


def inspect_lines(record: dict, intervention: Any) -> list[str]:
    """What ``oloproof inspect DIAGNOSIS_ID`` prints: one line a case, then the excluded ones."""
    lines = []
    for c in record["cases"]:
        line = (f"{c['id']}: {c['label']}, {c['reason']}, strength {c['strength']}, "
                f"best relevant position {c['position']}")
        if not intervention.labels_by_recovery and "recovered" in c:
            line += f", recovered under {intervention.label}: {'yes' if c['recovered'] else 'no'}"
            if c.get("control_passed"):
                line += f", passed in {intervention.control_label}"
        lines.append(line)
    return lines + [f"{e['id']}: not diagnosed, {e['reason']}"
                    for e in sorted(record["excluded"], key=lambda e: e["id"])]


def label_lines(cases: list[dict], n: int) -> list[str]:
    """One line a label (``RETRIEVAL_MISS: 1 of 4, ...``), one a reason for UNRESOLVED."""
    counts = Counter(c["label"] for c in cases)
    lines = []
    for label in ORDER:
        if not counts[label]:
            continue
        if label == "UNRESOLVED":
            reasons = Counter(c["reason"] for c in cases if c["label"] == label)
            order = [r for r in UNRESOLVED_WHY if r in reasons] + sorted(r for r in reasons if r not in UNRESOLVED_WHY)
            lines += [f"UNRESOLVED: {reasons[r]} of {n}, {UNRESOLVED_WHY.get(r, r)}" for r in order]
        else:
            lines.append(f"{label}: {counts[label]} of {n}, {DESCRIPTION[label]}")
    return lines


def implication_lines(cases: list[dict]) -> list[str]:
    """The strongest words diagnosis uses: "Implicated" and "Candidate experiment".

    The most common label among the recovered-by-stage labels and GENERATION_FAILURE is
    implicated; labels tied at that count are all listed, never one picked by an arbitrary order.
    A recovered failure is one that recovered under the intervention and failed in the control.
    """
    counts = Counter(c["label"] for c in cases)
    top = max(counts[label] for label in FACTORS)
    if not top:
        return []
    recovered = sum(1 for c in cases if c.get("recovered") and not c.get("control_passed"))
    lines = []
    for label, (factor, experiments) in FACTORS.items():
        if counts[label] != top:
            continue
        among = f"the {len(cases)} selected failures" if label == "GENERATION_FAILURE" else \
            f"the {recovered} recovered failures"
        lines.append(f"Implicated: {factor}, in {top} of {among}.")
        lines += [f"Candidate experiment: {e}. {HYPOTHESIS}" for e in experiments]
    return lines
