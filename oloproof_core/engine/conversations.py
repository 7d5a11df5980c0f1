"""Conversations in a run: batches that keep a conversation whole, and its turns executed in waves
(every conversation's turn 1, then every turn 2 with its history filled, ...). docs/conversations.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from oloproof_core.config.turns import conversation_of, is_turn, turn_id, turn_of
from oloproof_core.model.records import Case, Execution

CLUSTER = "metadata.conversation"  # the unit of a suite with conversations, always


def has_conversations(cases: Iterable[Case]) -> bool:
    """Whether any case is a conversation's turn (one pass over the cases)."""
    return any(is_turn(case) for case in cases)


def whole_batches(cases: Iterable[Case], size: int) -> Iterator[list[Case]]:
    """``cases`` in lists of about ``size``, read as needed; a list never ends inside a
    conversation (its turns are consecutive in the cases), so it may run a little longer."""
    batch: list[Case] = []
    for case in cases:
        if len(batch) >= size and not (is_turn(case) and turn_of(case) > 1):
            yield batch
            batch = []
        batch.append(case)
    if batch:
        yield batch


def execute_waves(run: Any, items: Sequence[Case]) -> tuple[list[Case], list[Execution | None], bool]:
    """Execute ``items`` (a batch's cases, with their trials) through ``run(cases) -> (executions,
    interrupted)``: every first turn (and plain case) at once, then every second turn with the
    history of its conversation's earlier turns in the same trial, and so on. Returns the items
    with their history filled, their executions and whether Ctrl-C stopped it. A turn whose
    earlier turn has no output is not executed: missing, ``earlier_turn_missing: CONV#J``."""
    cases = list(items)
    done: list[Execution | None] = [None] * len(cases)
    waves: dict[int, list[int]] = {}
    for i, case in enumerate(cases):
        waves.setdefault(turn_of(case), []).append(i)
    if len(waves) == 1:  # nothing waits for an earlier turn: one call, as a run without conversations
        done, interrupted = run(cases)
        return cases, done, interrupted
    history: dict[tuple[str, int], list[dict]] = {}  # (conversation, trial) -> the turns so far
    broken: dict[tuple[str, int], str] = {}  # (conversation, trial) -> the first turn without output
    for k in sorted(waves):
        ready = []
        for i in waves[k]:
            case = cases[i]
            key = (conversation_of(case), case.trial)
            if k > 1 and (key in broken or len(history.get(key, ())) != k - 1):
                missing = broken.get(key) or turn_id(key[0], len(history.get(key, ())) + 1)
                broken.setdefault(key, missing)
                done[i] = Execution(missing=f"earlier_turn_missing: {missing}")
                continue
            if k > 1:
                cases[i] = attrs.evolve(case, history=tuple(history[key]))
            ready.append(i)
        executions, interrupted = run([cases[i] for i in ready]) if ready else ([], False)
        for i, execution in zip(ready, executions):
            done[i] = execution
            key = (conversation_of(cases[i]), cases[i].trial)
            if execution is None or execution.missing is not None:
                broken.setdefault(key, cases[i].id)
            elif key not in broken:
                history.setdefault(key, []).append({"input": cases[i].input, "output": execution.output})
        if interrupted:
            return cases, done_or_none(done, waves, k), True
    return cases, done, False


def done_or_none(done: list, waves: dict[int, list[int]], k: int) -> list:
    """After Ctrl-C in wave ``k``: the later waves are not run (None: interrupted)."""
    for later in waves:
        if later > k:
            for i in waves[later]:
                done[i] = None
    return done
