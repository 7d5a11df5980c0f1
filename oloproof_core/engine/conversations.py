"""Conversations in a run: batches that keep a conversation whole, and its turns executed in waves
(every conversation's turn 1, then every turn 2 with its history filled, ...). docs/conversations.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from oloproof_core.config.turns import conversation_of, is_turn, turn_id, turn_of
from oloproof_core.model.errors import ConfigError
from oloproof_core.model.records import LAST_TURN, Case, Execution, Judgment

CLUSTER = "metadata.conversation"  # the unit of a suite with conversations, always


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
    if set(waves) == {1}:  # nothing waits for an earlier turn: one call, as a run without conversations
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
        if interrupted:  # the later waves are not run: None, interrupted
            return cases, done, True
    return cases, done, False




def judge_conversations(derived: Mapping[str, str], part: list[tuple]) -> list[tuple]:
    """A batch's finished (case, execution, judgments, trials), each conversation's last turn given
    the conversation criteria ``derived`` (name -> its turn criterion): fail when any turn failed
    (``detail.first_failing_turn``), else missing when any turn is, else pass; every other turn is
    excluded (``judged_on_last_turn``), so each criterion counts conversations."""
    if not derived:
        return part
    turns: dict[str, list[int]] = {}
    for i, (case, *_) in enumerate(part):
        turns.setdefault(conversation_of(case), []).append(i)
    for members in turns.values():
        *earlier, last = members
        for i in earlier:
            part[i][2].update({name: Judgment.excluded(LAST_TURN) for name in derived})
        for name, criterion in derived.items():
            part[last][2][name] = all_turns([(turn_of(part[i][0]), part[i][2].get(criterion)) for i in members])
    return part


def all_turns(judged: Sequence[tuple[int, Judgment | None]]) -> Judgment:
    """A conversation's judgment of a criterion from its turns' (turn index, judgment)."""
    for k, j in judged:
        if j is not None and j.status == "fail":
            return Judgment.failed(f"turn {k} failed", first_failing_turn=k)
    for k, j in judged:
        if j is None or j.status == "missing":
            return Judgment.missing(f"turn {k}: {j.reason if j is not None else 'missing'}")
    if all(j.status == "excluded" for _, j in judged):
        return Judgment.excluded(judged[0][1].reason or "excluded")
    return Judgment.passed()


class FirstFailing:
    """How many conversations first failed each conversation criterion at each turn: the run's
    ``First failing turn:`` line and its summary's ``conversations`` record."""

    def __init__(self, derived: Mapping[str, str]):
        self.derived = derived
        self.conversations = 0
        self.counts: dict[str, dict[str, int]] = {name: {} for name in derived}

    def add(self, part: Sequence[tuple]) -> None:
        for _, _, judgments, _ in part:
            first = judgments.get(next(iter(self.derived), ""))
            if first is None or first.reason == LAST_TURN:
                continue
            self.conversations += 1
            for name in self.derived:
                j = judgments.get(name)
                if j is not None and j.status == "fail":
                    k = str(j.detail["first_failing_turn"])
                    self.counts[name][k] = self.counts[name].get(k, 0) + 1

    def record(self) -> dict:
        return {"conversations": self.conversations,
                "first_failing_turn": {name: dict(sorted(c.items(), key=lambda kv: int(kv[0])))
                                       for name, c in self.counts.items()}}


def with_scope(evaluator: Any, scope: Any, where: str) -> Any:
    """An evaluator with ``scope: conversation``: its ``for_conversation()`` (an LLM judge's, over
    the whole transcript), judged on each conversation's last turn only (:func:`last_turns`)."""
    if scope not in ("turn", "conversation"):
        raise ConfigError(f"scope must be turn or conversation, got {scope!r}", where=where,
                          fix="write scope: conversation (judged once per conversation, on its last turn), or remove it")
    if scope == "turn":
        return evaluator
    make = getattr(evaluator, "for_conversation", None)
    if make is None:
        raise ConfigError(f"evaluator {type(evaluator).__name__} does not judge a whole conversation", where=where,
                          fix="remove scope:, or use rubric_judge for a criterion over the transcript")
    try:
        return make()
    except ConfigError as exc:
        raise ConfigError(exc.problem, where=where, fix=exc.fix) from None


def last_turns(cases: Sequence[Case]) -> set[int]:
    """The indices of ``cases`` that are the last turn of their conversation in that trial (a plain
    case is its own conversation's last turn); a batch holds whole conversations."""
    last: dict[tuple[str, int], int] = {}
    for i, case in enumerate(cases):
        last[(conversation_of(case), case.trial)] = i
    return set(last.values())
