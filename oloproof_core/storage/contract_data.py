"""What the conformance kit writes: a run header, case records and a summary."""

from __future__ import annotations

from typing import Any


def run_header(run_id: str, cases: int = 3, **extra: Any) -> dict:
    """A run header as the runner writes it (the stores read only ``id`` and ``parent``)."""
    return {"id": run_id, "created": "2026-01-01T00:00:00Z", "state": "UNGATED/COMPLETE", "config": "oloproof.yaml",
            "system": {"name": "kit", "version": "1", "kind": "callable", "identity": {"code": "x"}},
            "evaluators": {}, "metrics": {}, "cases": cases, **extra}


def case_records(n: int, tag: str = "") -> list[dict]:
    """Case records with nested data, key order that must survive, and text beyond ASCII."""
    return [{"id": f"c{i:03d}", "case": {"input": {"q": f"question {i} {tag} — é 漢字 \U0001f600"},
                                       "expected": {"answer": str(i)}, "metadata": {"n": i}},
             "output": {"answer": str(i), "z": 1, "a": [1.5, None, True]},
             "judgments": {"b_second": {"value": True}, "a_first": {"value": i % 2 == 0}}} for i in range(n)]


SUMMARY = {"state": "UNGATED/COMPLETE", "gate": None, "exit_code": 0, "caches": {}, "decisions": [],
           "metrics": {"answer_correct": {"value": 0.5, "cells": ["0.5", "[0.1, 0.9]", "n=3"]}}, "policy": None}
