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

import attrs

from oloproof_core.config.turns import turn_id
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.identity import canonical, digest
from oloproof_core.model.records import Case, Execution, Judgment
from oloproof_core.model.retrieval import JUDGED_BY, Evidence, judged_case, observe
from oloproof_core.engine.work import InterventionWork
from oloproof_core.engine.execution import executor_of
from oloproof_core.engine.runner import new_run_id
from oloproof_core.statistics.units import ALL_TURNS, combine_trials

ORDER = ("RETRIEVAL_MISS", "RANKED_OUT", "CONTEXT_ASSEMBLY_LOSS", "GENERATION_FAILURE", "UNRESOLVED")
# the label a recovered case gets from where the run left its relevant evidence
BY_EVIDENCE = {"not_retrieved": ("RETRIEVAL_MISS", "relevant_not_retrieved"),
               "beyond_top_k": ("RANKED_OUT", "relevant_ranked_below_top_k"),
               "in_context": ("UNRESOLVED", "relevant_in_context"),
               "unknown": ("UNRESOLVED", "no_relevance_labels")}


def out_of_context(state: str | None) -> bool:
    """Whether an evidence state says the relevant evidence was observed outside the context."""
    return state in ("not_retrieved", "beyond_top_k", "not_in_context") or str(state).startswith("dropped_for_")


def gold_label(evidence: Evidence, recovered: bool, control_passed: bool) -> tuple[str, str]:
    """The label and reason of one case: the control first, recovery second, the evidence last."""
    if control_passed:
        return "UNRESOLVED", "passed_in_control"
    if not recovered:
        return "GENERATION_FAILURE", "fails_with_gold_context"
    # retrieved within top_k, and not in the context: lost while the context was assembled
    return BY_EVIDENCE.get(evidence.state, ("CONTEXT_ASSEMBLY_LOSS", "relevant_dropped_from_context"))


def identity_changes(old: dict, new: dict) -> str:
    """What differs between two system identities, in a few words (``generator.py changed``)."""
    parts = []
    old_project, new_project = old.get("project") or {}, new.get("project") or {}
    old_modules, new_modules = old_project.get("modules", {}), new_project.get("modules", {})
    for path in sorted(set(old_modules) | set(new_modules)):
        if path not in new_modules:
            parts.append(f"{path} no longer loaded")
        elif path not in old_modules:
            parts.append(f"{path} newly loaded")
        elif old_modules[path] != new_modules[path]:
            parts.append(f"{path} changed")
    for name in sorted(set(old_project.get("packages", {})) | set(new_project.get("packages", {}))):
        if old_project.get("packages", {}).get(name) != new_project.get("packages", {}).get(name):
            parts.append(f"package {name} changed")
    for key in sorted(set(old) | set(new)):
        if key != "project" and canonical(old.get(key)) != canonical(new.get(key)):
            parts.append("its code" if key == "code" else f"{key} changed")
    return ", ".join(parts[:5]) + (f" and {len(parts) - 5} more" if len(parts) > 5 else "") or "its settings"


class Diagnosis:
    """One ``oloproof diagnose`` invocation over a stored run."""

    def __init__(self, suite: Any, plugins: Any, store: Any, run_id: str, criterion: str, options: dict | None = None,
                 only: tuple[str, ...] = ()):
        """:param options: the intervention's plain options (``--top-k`` ...), for an executor's workers.
        :param only: ``--case ID``: diagnose these failed cases (a conversation's turn: ``CONV#K``) only."""
        self.suite, self.plugins, self.store, self.run_id, self.criterion = suite, plugins, store, run_id, criterion
        self.options = dict(options or {})
        self.header, _ = store.get_run(run_id)
        if self.header.get("parent"):
            raise ConfigError(f"{run_id} is the {self.header.get('role')} run of a diagnosis of "
                              f"{self.header['parent']}, not a run of the suite",
                              fix=f"diagnose {self.header['parent']}")
        if criterion.endswith(ALL_TURNS) and criterion in self.header["evaluators"]:
            raise ConfigError(f"{criterion!r} is a conversation criterion, and diagnose re-executes turns",
                              fix=f"diagnose the turns that failed: --criterion {criterion[:-len(ALL_TURNS)]}")
        if criterion not in self.header["evaluators"]:
            raise ConfigError(f"run {run_id} has no criterion {criterion!r}",
                              fix=f"use one of: {', '.join(self.header['evaluators'])}")
        system = suite.system
        if canonical(system.identity) != canonical(self.header["system"]["identity"]):
            changed = identity_changes(self.header["system"]["identity"], system.identity)
            made_with = self.header.get("config")
            rerun = "`oloproof run`" if made_with in (None, "oloproof.yaml") else f"`oloproof run --config {made_with}`"
            other = (f"; it was made with --config {made_with}, not {suite.config_path.name}"
                     if made_with and made_with != suite.config_path.name else "")
            raise ConfigError(f"the system of {run_id} has changed since it ran ({changed}){other}, and diagnose "
                              "re-executes that system", fix=f"run {rerun} again and diagnose the new run")
        spec = next((s for s in suite.evaluators if s.evaluator.criterion == criterion), None)
        if spec is None or canonical(spec.identity) != canonical(self.header["evaluators"][criterion]):
            raise ConfigError(f"the evaluator of {criterion!r} has changed since {run_id} ran (or left the suite), "
                              "and diagnose judges the re-executed cases with it",
                              fix="run `oloproof run` again and diagnose the new run")
        self.evaluator = spec.evaluator
        # only the records a diagnosis reads: those that failed the criterion (filtered as the run streams)
        self.failed = [r for r in store.run_cases(run_id)
                       if r["judgments"].get(criterion, {}).get("status") == "fail" and (not only or r["id"] in only)]
        failing = {r["id"] for r in self.failed}
        if only and set(only) - failing:
            absent = sorted(set(only) - failing)[0]
            raise ConfigError(f"case {absent!r} did not fail {criterion} in {run_id}", where="--case",
                              fix=f"name a case that failed it (oloproof inspect {run_id} --failures)")
        # the suite's cases read as they stream; without human relevance labels, the run's judged ones
        # (relevance: {source: judge}), so positions and evidence read them, and say so (judged)
        judge = getattr(suite, "relevance_judge", None)
        by_id = {r["id"]: r for r in self.failed}
        self.cases = {c.id: judged_case(c, by_id[c.id]["judgments"], judge) for c in suite.cases if c.id in failing}
        # a conversation's turn is re-executed with the history it had in the run, replayed from the
        # record (not generated again); where the case file's earlier turns now differ, it is said
        self.cases, self.history_differs = replayed_history(self.cases, by_id, suite.cases)
        # the unit the run counted positions in (older runs recorded none: the suite's)
        self.unit = self.header.get("relevance_unit") or suite.relevance_unit
        self.pending: list[tuple[dict, list, dict]] = []  # child runs to store with the diagnosis
        # a run with `trials:` re-executes each case as many times, and reads its stored trials
        self.trials = int((self.header.get("design") or {}).get("trials", 1))

    # -- re-execution ----------------------------------------------------------------------

    def child_run(self, role: str, intervention: Any, selected: list[dict], call: str) -> tuple[str, dict, dict]:
        """Re-execute the selected cases (``call`` is ``apply``, the intervention, or ``control``), each as
        many times as the run's trials, judge them on the criterion and store the child run.
        Returns its id, case -> how many trials passed, and case -> the evidence its (first)
        re-execution recorded.

        The child run is stored by :meth:`run`, together with the diagnosis that names it.
        Nothing here reads the execution cache, and the interventions generate uncached: a
        control served from a cache would say nothing about stability.
        """
        run_id = new_run_id()
        system = self.suite.system

        items = [(trial_case(self.cases[r["id"]], r, t), r) for r in selected for t in range(self.trials)]
        executions: list[Execution] = [Execution(missing="interrupted")] * len(items)

        def keep(i: int, execution: Execution) -> None:
            executions[i] = execution

        # through the run's executor; its workers rebuild the intervention from its name and options
        recipe = attrs.evolve(self.suite.recipe, intervention=(intervention.name, self.options, call)) \
            if self.suite.recipe is not None else None
        work = InterventionWork(system, self.plugins, self.suite.concurrency, intervention, call, recipe,
                                self.store, self.suite.stage_cache)
        executor = executor_of(self.suite, self.plugins)
        try:
            executor.run(work, items, keep)
        finally:
            if hasattr(executor, "close"):
                executor.close(work)

        def judged(i: int) -> tuple[dict, Execution, Judgment]:
            (case, record), execution = items[i], executions[i]
            if execution.missing is not None:
                return record, execution, Judgment.missing(execution.missing)
            try:
                return record, execution, self.evaluator.evaluate(case, execution)
            except Exception as exc:  # noqa: BLE001 - as in a run: an evaluator failing leaves the judgment missing
                return record, execution, Judgment.missing(f"evaluator_error: {type(exc).__name__}: {exc}")

        workers = min(self.suite.concurrency, getattr(system, "concurrency", None) or self.suite.concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="oloproof-diagnose") as pool:
            done = list(pool.map(judged, range(len(items))))
        count = self.trials
        by_case = [done[i * count:(i + 1) * count] for i in range(len(selected))]
        results = [(runs[0][0], runs[0][1], combine_trials([j for _, _, j in runs])) for runs in by_case]
        header = {"id": run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "system": self.header["system"], "config": self.header.get("config"),
                  "evaluators": {self.criterion: self.header["evaluators"][self.criterion]},
                  "metrics": {self.criterion: self.header["metrics"][self.criterion]},
                  "cases": len(selected), "state": "DIAGNOSTIC/COMPLETE", "parent": self.run_id,
                  "role": role, "intervention": intervention.name, "slices": [], "min_slice_support": 0,
                  "relevance_unit": self.unit}
        rows = [{"id": r["id"], "case": r["case"], **e.to_data(), "judgments": {self.criterion: j.to_data()}}
                for r, e, j in results]
        for row, (record, _, _) in zip(rows, results):  # a clustered run's children pair by its clusters
            if record.get("cluster") is not None:
                row["cluster"] = record["cluster"]
        if count > 1 or (self.header.get("design") or {}).get("cluster"):
            header["design"] = self.header["design"]
        if count > 1:
            for row, runs in zip(rows, by_case):
                row["trials"] = [{**e.to_data(), "judgments": {self.criterion: j.to_data()}} for _, e, j in runs]
        # stored with the diagnosis, in one transaction: a diagnosis that dies leaves no child run
        self.pending.append((header, rows, {"state": header["state"], "gate": None, "metrics": {}, "decisions": [],
                                            "caches": {}}))
        evidence = {r["id"]: None if e.missing is not None else
                    self.observe(self.cases[r["id"]], e).state for r, e, _ in results}
        passes = {runs[0][0]["id"]: sum(1 for _, _, j in runs if j.status == "pass") for runs in by_case}
        return run_id, passes, evidence

    def observe(self, case: Case, execution: Execution | dict) -> Evidence:
        """Where ``execution`` (or a stored record of one) left the case's relevant evidence."""
        if isinstance(execution, dict):
            execution = Execution.from_data(execution)
        return observe(case, execution, self.unit, getattr(self.suite.system, "top_k", None),
                       getattr(self.suite, "evidence_min_grade", None))

    def latest_gold(self) -> tuple[str, dict] | None:
        """The run's latest gold-context diagnosis on this criterion that re-executed something."""
        found = [(i, r) for i, r in self.store.list_objects("diagnosis")
                 if r.get("run") == self.run_id and r.get("intervention") == "gold-context"
                 and r.get("criterion") == self.criterion and r.get("children")]
        return found[-1] if found else None

    # -- the diagnosis ---------------------------------------------------------------------

    def run(self, intervention: Any) -> tuple[str, dict]:
        """Diagnose and store the diagnosis. Returns its content id and its record, which
        :mod:`oloproof_core.diagnose_report` prints."""
        supported = intervention.supports(self.suite.system)
        if supported:  # bad options stop the command before anything is re-executed
            intervention.check(self.suite.system)
        failed = self.failed
        selected = [r for r in failed if (self.cases.get(r["id"]) or _case(r)).expected.get("gold_context")]
        excluded = [r for r in failed if r not in selected]
        # a case that passed in some of the run's trials and failed in others is unstable: it is
        # labelled before any intervention is tried, and not re-executed
        unstable = [r for r in selected if unstable_in_run(r, self.criterion)]
        selected = [r for r in selected if r not in unstable]
        for r in selected:
            if r["id"] not in self.cases:
                raise ConfigError(f"case {r['id']!r} of {self.run_id} is no longer in the case file",
                                  fix="diagnose a run of the current cases")
        record: dict = {"kind": "diagnosis", "run": self.run_id, "intervention": intervention.name,
                        "label": intervention.label, "control_label": intervention.control_label,
                        "labels_by_recovery": bool(intervention.labels_by_recovery),
                        "criterion": self.criterion, "relevance_unit": self.unit, "selected": len(selected) + len(unstable),
                        "supported": bool(supported),
                        "excluded": [{"id": r["id"], "reason": "no_gold_context"} for r in excluded]}
        if not supported and callable(getattr(self.suite.system, "accepts", None)):
            record["unsupported"] = "no_override"  # a service that could take it, once its request says where
        if self.trials > 1:
            record.update(trials=self.trials, unstable=len(unstable))
        if getattr(self.suite, "evidence_min_grade", None) is not None:  # absent: every grade above 0, as before
            record["evidence_min_grade"] = self.suite.evidence_min_grade
        cases_out: list[dict] = []
        for r in unstable:
            if r["id"] not in self.cases:
                continue  # reported with the other cases no longer in the case file below
            seen = self.observe(self.cases[r["id"]], r)
            cases_out.append({"id": r["id"], "label": "UNRESOLVED", "reason": "unstable", "strength": "none",
                              "position": _position(seen.position), "evidence": seen.state})
        children: list[tuple[str, str]] = []
        if not supported:
            for r in selected:
                seen = self.observe(self.cases[r["id"]], r)
                cases_out.append({"id": r["id"], "label": "UNRESOLVED", "reason": "intervention_unsupported",
                                  "strength": "none", "position": _position(seen.position), "evidence": seen.state})
        elif selected:
            prepare = getattr(intervention, "prepare", None)  # an intervention that reads the run first
            if prepare is not None:
                self.options.update(prepare(self.store.run_cases(self.run_id)) or {})
            run_id, passes, replayed = self.child_run(intervention.label, intervention, selected, "apply")
            control_id, control_passes, _ = self.child_run(intervention.control_label, intervention, selected,
                                                           "control")
            # a recovery counts only when the intervention beats the control across the trials: it
            # passes in every trial, and the control in none (else the control marks it unstable)
            passed = {i: k == self.trials and (self.trials == 1 or k > control_passes[i]) for i, k in passes.items()}
            control_passed = {i: k > 0 for i, k in control_passes.items()}
            partly = {i for i, k in passes.items() if 0 < k < self.trials and not control_passed[i]}
            record["control_passed"] = sum(control_passed.values())
            record["recovered"] = sum(passed.values())
            if intervention.labels_by_recovery:
                cases_out += self.labelled(selected, passed, control_passed, partly)
            else:
                confirmed, children = self.confirmed(record, intervention, selected, passed, control_passed, replayed)
                cases_out += confirmed
            children += [(intervention.label, run_id), (intervention.control_label, control_id)]
        for c in cases_out:  # a position read from a relevance judge's labels says so
            judged = self.cases[c["id"]].expected.get(JUDGED_BY) if c["id"] in self.cases else None
            if judged and "judged" not in c:
                c["judged"] = judged
            turn = self.cases[c["id"]].metadata.get("turn") if c["id"] in self.cases else None
            if isinstance(turn, int) and "conversation" in self.cases[c["id"]].metadata:
                c["turn"] = turn  # a conversation's turn: labels are counted per turn too
        record.update(cases=sorted(cases_out, key=lambda c: c["id"]), children=[list(c) for c in children])
        if self.history_differs:  # turns whose recorded history the case file's earlier turns no longer match
            record["history_differs"] = self.history_differs
        object_id = "sha256:" + digest(record)
        batch = getattr(self.store, "batch", None)  # a store without batches writes them one by one
        with batch() if batch is not None else contextlib.nullcontext():
            for header, rows, summary in self.pending:
                self.store.save_run(header, rows, summary)
            self.store.put_object("diagnosis", object_id, record)
        return object_id, record

    def labelled(self, selected: list[dict], passed: dict, control_passed: dict,
                 partly: set | frozenset = frozenset()) -> list[dict]:
        """Labels from this intervention's recoveries (gold context), and each case's evidence.

        :param partly: cases that passed in some trials under the intervention, not all (with the
            control passing in none): UNRESOLVED ``recovered_in_some_trials``.
        """
        out = []
        for r in selected:
            seen = self.observe(self.cases[r["id"]], r)
            label, reason = gold_label(seen, passed[r["id"]], control_passed[r["id"]])
            if r["id"] in partly:
                label, reason = "UNRESOLVED", "recovered_in_some_trials"
            strength = "none" if label == "UNRESOLVED" else (
                "intervention_recovery" if passed[r["id"]] else "intervention_non_recovery")
            out.append({"id": r["id"], "label": label, "reason": reason, "strength": strength,
                        "position": _position(seen.position), "evidence": seen.state,
                        "recovered": passed[r["id"]], "control_passed": control_passed[r["id"]]})
        return out

    def confirmed(self, record: dict, intervention: Any, selected: list[dict], passed: dict, control_passed: dict,
                  replayed: dict) -> tuple[list[dict], list[tuple[str, str]]]:
        """Carry the labels of the run's latest gold-context diagnosis forward, and count the
        cases of the label this intervention tests (``confirms``) that it recovered; for those
        that did not, where the re-execution left their relevant evidence."""
        gold = self.latest_gold()
        carried = {c["id"]: c for c in gold[1]["cases"]} if gold else {}
        target = getattr(intervention, "confirms", None)
        if target:
            tested = sorted(i for i, c in carried.items() if c["label"] == target)
            # a recovery that the control matched is no confirmation
            confirmed = [i for i in tested if passed.get(i) and not control_passed.get(i)]
            lacking = Counter(replayed.get(i) for i in tested
                              if i not in confirmed and not passed.get(i) and out_of_context(replayed.get(i)))
            record["confirms"] = {"label": target, "tested": len(tested), "confirmed": len(confirmed),
                                  "lacking": dict(sorted(lacking.items()))}
        cases_out = []
        for r in selected:
            if r["id"] in carried:
                c = dict(carried[r["id"]])
            else:
                seen = self.observe(self.cases[r["id"]], r)
                c = {"label": "UNRESOLVED", "reason": "no_gold_context_diagnosis", "strength": "none",
                     "position": _position(seen.position), "evidence": seen.state}
            c.update(id=r["id"], recovered=passed[r["id"]], control_passed=control_passed[r["id"]],
                     replay_evidence=replayed.get(r["id"]))
            cases_out.append(c)
        if gold:
            record["gold"] = {"id": gold[0], "cases": gold[1]["cases"],
                              **({"evidence_min_grade": gold[1]["evidence_min_grade"]}
                                 if gold[1].get("evidence_min_grade") is not None else {})}
            return cases_out, [tuple(pair) for pair in gold[1]["children"]]
        record["gold"] = None
        return cases_out, []


def unstable_in_run(record: dict, criterion: str) -> bool:
    """Whether a stored case passed in some of its run's trials and failed in others."""
    statuses = {t.get("judgments", {}).get(criterion, {}).get("status") for t in record.get("trials", ())}
    return {"pass", "fail"} <= statuses


def _position(position: Any) -> int | str:
    return "none" if position is None else position


def _case(record: dict) -> Case:
    data = record["case"]
    return Case(id=data["id"], input=data["input"], expected=data.get("expected", {}),
                metadata=data.get("metadata", {}))


def replayed_history(cases: dict[str, Case], records: dict[str, dict], suite_cases: Any) -> tuple[dict, list[dict]]:
    """The failed cases with each conversation turn's recorded history (``record["case"]["history"]``),
    and the turns whose earlier turns' inputs in the case file differ from that history:
    ``{"id": "refund#2", "turns": ["refund#1"]}``. One more pass over the suite's cases, only when
    a failed case has a history."""
    histories = {i: records[i]["case"].get("history") or [] for i in cases}
    wanted = {c.metadata["conversation"] for i, c in cases.items() if histories[i]}
    if not wanted:
        return cases, []
    current = {c.id: c.input for c in suite_cases if c.metadata.get("conversation") in wanted}
    replayed, differs = {}, []
    for i, case in cases.items():
        history = histories[i]
        replayed[i] = attrs.evolve(case, history=tuple(history)) if history else case
        conversation = case.metadata.get("conversation")
        changed = [turn_id(conversation, k) for k, turn in enumerate(history, 1)
                   if canonical(current.get(turn_id(conversation, k))) != canonical(turn.get("input"))]
        if changed:
            differs.append({"id": i, "turns": changed})
    return replayed, differs


def trial_case(case: Case, record: dict, trial: int) -> Case:
    """``case`` as trial ``trial`` of its run, with that trial's recorded history (a conversation's turn)."""
    case = attrs.evolve(case, trial=trial)
    trials = record.get("trials") or ()
    if case.history and trial < len(trials) and "history" in trials[trial]:
        case = attrs.evolve(case, history=tuple(trials[trial]["history"]))
    return case
