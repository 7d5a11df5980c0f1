"""Two stored runs of a few thousand cases, made byte for byte the same every time (fixed ids,
dates and identities, seeded values), for the tests that pin what the reading commands print.

Written straight through the local store's ``save_run``: the records have the shape a run stores
(outputs, judgments pass/fail/score/excluded/missing, cases with no output, slices, clusters).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

CANDIDATE = "run_01M8TD00000000000000000CAN"
BASELINE = "run_01M8TD00000000000000000BAS"
CRITERIA = {"ok": "proportion", "exact": "proportion", "score": "mean", "judged": "proportion"}
IDENTITY = {"type": "fixture", "options": {}, "plugin": ["oloproof", "0"], "code": ["0", "0"]}
SUITE = "system: {name: fixture, version: '1', callable: app:run}\ncases: cases.jsonl\n" \
        "evaluators:\n  - {type: contains, criterion: ok, field: answer, expected_field: answer}\n"


def _judgment(rng: random.Random, criterion: str, p: float) -> dict:
    roll = rng.random()
    if criterion == "score":
        return {"status": "score", "value": round(rng.random() ** (1 - p / 2), 3)}
    if criterion == "judged" and roll < 0.03:
        return {"status": "excluded", "reason": "no_gold_context"}
    if criterion == "judged" and roll < 0.05:
        return {"status": "missing", "reason": "judge_error: timeout"}
    ok = rng.random() < p
    return {"status": "pass", "value": 1.0} if ok else {"status": "fail", "value": 0.0, "reason": "not_contained",
                                                        "detail": {"field": "answer", "expected": "ok"}}


def records(n: int, seed: int, p: float, clusters: bool) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        case = {"id": f"c{i:05d}", "input": {"q": i}, "expected": {"answer": "ok"},
                "metadata": {"kind": "abc"[i % 3], "group": f"g{i // 7}"}}
        record = {"id": case["id"], "case": case}
        if rng.random() < 0.01:
            reason = rng.choice(["timeout", "error: ValueError: bad input"])
            record.update(output=None, artifacts={}, missing=reason,
                          judgments={c: {"status": "missing", "reason": reason} for c in CRITERIA})
        else:
            record.update(output={"answer": "ok" if rng.random() < p else "no"}, artifacts={},
                          judgments={c: _judgment(rng, c, p) for c in CRITERIA})
        record["slices"] = {"metadata.kind": case["metadata"]["kind"]}
        if clusters:
            record["cluster"] = case["metadata"]["group"]
        out.append(record)
    return out


def header(run_id: str, n: int, version: str, clusters: bool) -> dict:
    h = {"id": run_id, "created": "2026-12-01T00:00:00Z",
         "system": {"name": "fixture", "version": version, "kind": "callable", "identity": {"version": version}},
         "config": "oloproof.yaml", "evaluators": {c: {**IDENTITY, "criterion": c} for c in CRITERIA},
         "metrics": dict(CRITERIA), "cases": n, "state": "COMPLETE", "slices": ["metadata.kind"],
         "min_slice_support": 10, "relevance_unit": "doc", "confidence_level": 0.95}
    if clusters:
        h["design"] = {"trials": 1, "cluster": "metadata.group"}
    return h


def summary(rows: list[dict]) -> dict:
    metrics = {}
    for c in CRITERIA:
        values = [r["judgments"][c]["value"] for r in rows if r["judgments"][c]["status"] in ("pass", "fail", "score")]
        missing = sum(1 for r in rows if r["judgments"][c]["status"] == "missing")
        excluded = len(rows) - len(values) - missing
        mean = sum(values) / len(values)
        metrics[c] = {"value": mean, "low": mean - 0.01, "high": mean + 0.01, "observed": len(values),
                      "missing": missing, "excluded": excluded, "metric": CRITERIA[c],
                      "cells": [f"{mean:.3f}", f"[{mean - 0.01:.3f}, {mean + 0.01:.3f}]",
                                f"{len(values)} observed · {missing} missing · {excluded} excluded"]}
    return {"state": "COMPLETE", "gate": None, "exit_code": 0, "caches": {"execution": [0, len(rows)]},
            "decisions": [], "metrics": metrics}


def build(root: Path, n: int = 3000, clusters: bool = False, baseline_order: str = "same") -> Path:
    """A project at ``root`` whose store holds CANDIDATE and BASELINE (``baseline_order``: ``same``,
    ``shuffled`` or ``subset`` (every third case left out, the rest in order))."""
    from oloproof_core.workflows.project import Project

    root.mkdir(parents=True, exist_ok=True)
    (root / "oloproof.yaml").write_text(SUITE)
    (root / "compare.yaml").write_text(
        "version: 1\nblock_on: [FAIL]\nrules:\n"
        "  - {id: no_worse, metric: ok, kind: non-inferiority, margin: 2.0}\n"
        "  - {id: better_score, metric: score, kind: superiority, margin: 0.0}\n"
        "  - {id: judged_floor, metric: judged, kind: floor, min: 0.6}\n")
    store = Project(str(root / "oloproof.yaml")).store
    cand = records(n, 1, 0.72, clusters)
    base = records(n, 2, 0.70, clusters)
    store.save_run(header(CANDIDATE, n, "2", clusters), cand, summary(cand))
    if baseline_order == "shuffled":
        random.Random(3).shuffle(base)
    elif baseline_order == "subset":
        base = [r for i, r in enumerate(base) if i % 3]
    store.save_run(header(BASELINE, len(base), "1", clusters), base, summary(base))
    return root


def commands() -> dict[str, list[str]]:
    """The reading commands whose output is pinned, by name."""
    policy = ["--policy", "compare.yaml"]
    return {
        "inspect": ["inspect", CANDIDATE],
        "inspect-failures": ["inspect", CANDIDATE, "--failures"],
        "inspect-json": ["inspect", CANDIDATE, "--format", "json"],
        "inspect-failures-json": ["inspect", CANDIDATE, "--failures", "--format", "json"],
        "inspect-case": ["inspect", CANDIDATE, "--case", "c01234"],
        "inspect-case-json": ["inspect", CANDIDATE, "--case", "c01234", "--format", "json"],
        "compare": ["compare", CANDIDATE, BASELINE, *policy],
        "compare-all": ["compare", CANDIDATE, BASELINE, *policy, "--slices", "--cases"],
        "compare-json": ["compare", CANDIDATE, BASELINE, *policy, "--format", "json"],
        "compare-files": ["compare", CANDIDATE, BASELINE, *policy, "--junit", "out/junit.xml", "--junit-cases",
                          "--json", "out/compare.json", "--markdown", "out/compare.md"],
        "export": ["export", CANDIDATE],
    }


# the files a command writes, digested with its output
FILES = {"compare-files": ["out/junit.xml", "out/compare.json", "out/compare.md"],
         "export": [f".oloproof/bundles/{CANDIDATE}/cases.jsonl", f".oloproof/bundles/{CANDIDATE}/run.json"]}


def fingerprint(root: Path, name: str, stdout: bytes) -> str:
    """sha256 of a command's standard output and of the files it wrote."""
    import hashlib

    h = hashlib.sha256(stdout)
    for path in FILES.get(name, []):
        h.update(b"\0" + (root / path).read_bytes())
    return h.hexdigest()


if __name__ == "__main__":  # print the digests of each command's output (to pin them)
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for variant in sys.argv[1:] or ["same"]:
            order, _, cl = variant.partition("+")
            root = build(Path(tmp) / variant, clusters=cl == "clusters", baseline_order=order)
            for name, argv in commands().items():
                proc = subprocess.run([sys.executable, "-m", "oloproof", *argv], cwd=root, capture_output=True,
                                      env={**os.environ, "NO_COLOR": "1"})
                print(json.dumps([variant, name, proc.returncode, fingerprint(root, name, proc.stdout),
                                  proc.stderr.decode()[-300:]]))
