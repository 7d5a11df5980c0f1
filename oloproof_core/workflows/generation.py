"""Cases from a corpus (``oloproof generate``): a seeded plan of requests over the passages, a
generator plugin (``oloproof_register_generators``) that writes each question and reference
answer, two filters (answers the source passages do not support, near-duplicate questions), and
a cases file whose cases carry their source passages as ``gold_context`` and ``expected.relevant``.

Work is resumable: each request's outcome is appended to a progress file named by the plan's
digest (generator identity, corpus, count, mix, seed), so the same command after an interrupt
asks only what is left, and after a finished run asks nothing. docs/suite-without-labels.md.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from oloproof_core.model.errors import ConfigError, EvaluationError
from oloproof_core.model.identity import digest

KINDS = ("factoid", "two_passage", "paraphrased", "unanswerable")
DEFAULT_MIX = {"factoid": 0.4, "two_passage": 0.2, "paraphrased": 0.2, "unanswerable": 0.2}
WORD = re.compile(r"[a-z0-9]+")


# -- the corpus --------------------------------------------------------------------------------

def passage_of(value: Any, where: str) -> dict:
    """``{doc_id, chunk_id, text}`` from a corpus line or an index's Passage; ConfigError at ``where``."""
    data = value if isinstance(value, Mapping) else {k: getattr(value, k, None) for k in ("doc_id", "chunk_id", "text")}
    doc_id, chunk_id, text = data.get("doc_id"), data.get("chunk_id"), data.get("text")
    if not isinstance(doc_id, str) or not doc_id:
        raise ConfigError(f"a passage needs a doc_id string, got {doc_id!r}", where=where,
                          fix='write {"doc_id": "kb-01", "chunk_id": "0", "text": "..."}')
    if chunk_id is not None and (isinstance(chunk_id, bool) or not isinstance(chunk_id, (str, int))):
        raise ConfigError(f"chunk_id must be a string or a whole number, got {chunk_id!r}", where=where,
                          fix='write "chunk_id": "0", or leave it out')
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"passage {doc_id!r} has no text", where=where, fix='write its "text"')
    return {"doc_id": doc_id, "chunk_id": None if chunk_id is None else str(chunk_id), "text": text}


def read_corpus(path: str) -> list[dict]:
    """The passages of a JSONL file, one ``{doc_id, chunk_id?, text}`` a line; an error names its line."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the corpus {path}: {getattr(exc, 'strerror', None) or exc}", where="--corpus",
                          fix="give a JSONL file of passages, one {doc_id, chunk_id?, text} a line") from None
    passages = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"not JSON: {exc}", where=f"{path}:{number}", fix="write one JSON object a line") from None
        passages.append(passage_of(row if isinstance(row, dict) else {}, f"{path}:{number}"))
    return unique(passages, path)


def unique(passages: list[dict], where: str) -> list[dict]:
    seen: set = set()
    for passage in passages:
        key = (passage["doc_id"], passage["chunk_id"])
        if key in seen:
            raise ConfigError(f"passage {unit(passage)} appears twice", where=where,
                              fix="give every passage its own (doc_id, chunk_id)")
        seen.add(key)
    if not passages:
        raise ConfigError("the corpus has no passages", where=where, fix="add passages, one JSON object a line")
    return passages


def index_passages(system: Any) -> list[dict]:
    """The staged system's own index, through its ``passages()`` (docs/rag.md)."""
    listed = getattr(system, "passages", None)
    if not callable(listed):
        raise ConfigError("the suite's system cannot list its index", where="system",
                          fix="give --corpus passages.jsonl, or define passages() on the class of system.rag")
    return unique([passage_of(p, f"passages() item {i}") for i, p in enumerate(listed())], "passages()")


def unit(passage: Mapping[str, Any]) -> str:
    return passage["doc_id"] if passage.get("chunk_id") is None else f"{passage['doc_id']}#{passage['chunk_id']}"


# -- the plan ------------------------------------------------------------------------------------

def parse_mix(text: str | None, kinds: Iterable[str]) -> dict[str, float]:
    """``factoid=0.5,unanswerable=0.5`` as shares summing to 1, of kinds the generator writes."""
    if text is None:
        return dict(DEFAULT_MIX)
    kinds = tuple(kinds)
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        try:
            share = float(value) if sep else -1.0
        except ValueError:
            share = -1.0
        if name.strip() not in kinds or share < 0:
            raise ConfigError(f"{part!r} is not KIND=SHARE with a kind of {', '.join(kinds)}", where="--mix",
                              fix="write e.g. --mix factoid=0.4,two_passage=0.2,paraphrased=0.2,unanswerable=0.2")
        mix[name.strip()] = share
    if not mix or abs(sum(mix.values()) - 1) > 1e-6:
        raise ConfigError(f"the shares add up to {sum(mix.values()):g}, not 1", where="--mix",
                          fix="make the shares add up to 1")
    return {k: v for k, v in mix.items() if v > 0}


def allocate(count: int, mix: Mapping[str, float]) -> dict[str, int]:
    """``count`` split by the shares, largest remainders first (ties in the mix's order)."""
    exact = {kind: count * share for kind, share in mix.items()}
    counts = {kind: int(value) for kind, value in exact.items()}
    left = count - sum(counts.values())
    for kind in sorted(mix, key=lambda k: -(exact[k] - counts[k]))[:left]:
        counts[kind] += 1
    return counts


def pairs_of(passages: list[dict]) -> list[list[dict]]:
    """Two-passage sources: neighbouring chunks of one document; without any, neighbouring passages."""
    by_doc: dict[str, list[dict]] = {}
    for passage in passages:
        by_doc.setdefault(passage["doc_id"], []).append(passage)
    pairs = [chunks[i:i + 2] for chunks in by_doc.values() for i in range(0, len(chunks) - 1, 2)]
    return pairs or [passages[i:i + 2] for i in range(0, len(passages) - 1, 2)]


def plan(passages: list[dict], count: int, mix: Mapping[str, float], seed: int) -> list[dict]:
    """The requests, seeded: single-passage kinds dealt distinct passages while they last, two-passage
    requests a pair each; ids ``<kind>-<n>`` in a stable order."""
    rng = random.Random(seed)
    singles = passages[:]
    rng.shuffle(singles)
    pairs = pairs_of(passages)
    rng.shuffle(pairs)
    if "two_passage" in mix and len(passages) < 2:
        raise ConfigError("two_passage questions need at least two passages", where="--mix",
                          fix="add passages, or leave two_passage out of --mix")
    requests, dealt = [], 0
    for kind, n in allocate(count, mix).items():
        for i in range(n):
            if kind == "two_passage":
                sources = pairs[i % len(pairs)]
            else:
                sources, dealt = [singles[dealt % len(singles)]], dealt + 1
            requests.append({"id": f"{kind}-{i + 1:03d}", "kind": kind, "passages": sources, "seed": seed})
    return requests


# -- the work, resumable -------------------------------------------------------------------------

def estimate(generator: Any, requests: list[dict]) -> dict:
    """The generator's estimate of every request: calls, tokens and cost (None when unpriced)."""
    total: dict = {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost": 0.0}
    for request in requests:
        one = generator.estimate(request)
        for key in ("calls", "input_tokens", "output_tokens"):
            total[key] += int(one.get(key) or 0)
        total["cost"] = None if total["cost"] is None or one.get("cost") is None else total["cost"] + one["cost"]
    return total


def resume(path: Path, key: str) -> dict[str, dict]:
    """The outcomes kept under ``key`` (another plan's file is not read)."""
    if not path.is_file():
        return {}
    done = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # a line cut short by an interrupt: that request is asked again
            continue
        if isinstance(row, dict) and row.get("plan") == key and isinstance(row.get("id"), str):
            done[row["id"]] = row
    return done


def work(generator: Any, requests: list[dict], path: Path, key: str,
         progress: Callable[[int, int, int, dict], None] | None = None, concurrency: int = 1) -> list[dict]:
    """Every request's outcome, ``{id, item}`` or ``{id, dropped}``, asking only those not in the
    progress file, ``concurrency`` at a time; each outcome is appended as it comes, so an interrupt
    loses at most the requests in flight."""
    import threading
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    done = resume(path, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    spent: dict = {"calls": 0, "resumed": sum(1 for r in requests if r["id"] in done), "lock": threading.Lock()}
    checks = callable(getattr(generator, "check", None))
    todo = [r for r in requests if r["id"] not in done]
    left, finished = iter(todo), len(requests) - len(todo)

    def report() -> None:
        if progress is not None:
            dropped = sum(1 for r in requests if "dropped" in done.get(r["id"], {}))
            progress(finished, len(requests), dropped, {k: v for k, v in spent.items() if k != "lock"})

    if not todo:  # all done before: say so once
        report()
    pool = ThreadPoolExecutor(max(1, concurrency))
    try:
        with path.open("a", encoding="utf-8") as out:
            running = {pool.submit(ask, generator, r, checks, spent): r for r in itertools.islice(left, concurrency)}
            while running:
                ready, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in ready:
                    request = running.pop(future)
                    done[request["id"]] = outcome = {"plan": key, "id": request["id"], **future.result()}
                    out.write(json.dumps(outcome, ensure_ascii=False) + "\n")
                    out.flush()
                    finished += 1
                    report()
                    for following in itertools.islice(left, 1):
                        running[pool.submit(ask, generator, following, checks, spent)] = following
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [done[r["id"]] for r in requests]


def ask(generator: Any, request: dict, checks: bool, spent: dict) -> dict:
    def add(usage: Mapping[str, Any] | None) -> None:
        with spent["lock"]:
            spent["calls"] += 1
            for name, value in (usage or {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    spent[name] = spent.get(name, 0) + value

    try:
        made = generator.generate(request)
        add(made.get("usage"))
        item = {"question": str(made["question"]).strip(), "answer": str(made["answer"]).strip()}
        if not item["question"]:
            raise EvaluationError("empty question")
        if checks and request["kind"] != "unanswerable":
            verdict = generator.check(request, item)
            add(verdict.get("usage"))
            if not verdict.get("supported"):
                return {"dropped": "answer_not_supported", "item": item, "rationale": str(verdict.get("rationale", ""))}
    except (EvaluationError, KeyError, TypeError) as exc:
        return {"dropped": "generator_error", "rationale": str(exc)}
    return {"item": item}


# -- the filters and the cases -------------------------------------------------------------------

def shingles(text: str) -> set:
    words = WORD.findall(text.lower())
    return set(zip(words, words[1:])) or set(words)


def near_duplicates(kept: list[tuple[dict, dict]], threshold: float) -> set[str]:
    """Ids of questions whose word-bigram Jaccard with an earlier kept question is >= ``threshold``."""
    seen: list[set] = []
    dropped = set()
    for request, outcome in kept:
        mine = shingles(outcome["item"]["question"])
        if any(len(mine & other) / max(1, len(mine | other)) >= threshold for other in seen):
            dropped.add(request["id"])
        else:
            seen.append(mine)
    return dropped


def balance(kept: list[tuple[dict, dict]], mix: Mapping[str, float], tolerance: float = 0.05) -> list[tuple[dict, dict]]:
    """The most cases, earliest first, whose kinds keep the asked mix: every kind's share within
    ``tolerance`` of the asked one (counts by largest remainders); failing that, the most that fit."""
    by_kind: dict[str, list] = {kind: [] for kind in mix}
    for pair in kept:
        by_kind[pair[0]["kind"]].append(pair)
    largest = None
    for total in range(len(kept), 0, -1):
        counts = allocate(total, mix)
        if any(counts[kind] > len(by_kind[kind]) for kind in mix):
            continue
        largest = largest or counts
        if all(abs(counts[kind] / total - share) <= tolerance for kind, share in mix.items()):
            break
    else:
        counts = largest
    if counts is None:
        return []
    chosen = {id(p) for kind in mix for p in by_kind[kind][:counts[kind]]}
    return [p for p in kept if id(p) in chosen]


def case_of(request: dict, item: dict, synthetic: dict, question_field: str, abstention: str) -> dict:
    passages = request["passages"]
    expected: dict[str, Any]
    if request["kind"] == "unanswerable":
        expected = {"answer": abstention, "relevant": [], "answerable": False}
    else:
        expected = {"answer": item["answer"],
                    "relevant": [{"doc_id": p["doc_id"], **({"chunk_id": p["chunk_id"]} if p["chunk_id"] else {}),
                                  "grade": 2} for p in passages],
                    "gold_context": [{"doc_id": p["doc_id"], **({"chunk_id": p["chunk_id"]} if p["chunk_id"] else {}),
                                      "text": p["text"]} for p in passages]}
    return {"id": f"gen-{request['id']}", "input": {question_field: item["question"]}, "expected": expected,
            "metadata": {"kind": request["kind"], "source": [unit(p) for p in passages],
                         "synthetic": {**synthetic, "kind": request["kind"]}}}


def generate_cases(generator: Any, name: str, passages: list[dict], *, count: int, mix: Mapping[str, float],
                   seed: int, progress_dir: Path, duplicate_threshold: float = 0.6, question_field: str = "question",
                   abstention: str = "I don't know.", progress: Any = None,
                   concurrency: int = 1) -> tuple[list[dict], dict]:
    """The cases and the figures (asked, dropped by reason, trimmed, by kind)."""
    requests = plan(passages, count, mix, seed)
    identity = digest(dict(generator.identity))
    key = digest({"generator": name, "identity": identity, "corpus": digest(passages), "count": count,
                  "mix": dict(mix), "seed": seed})
    outcomes = work(generator, requests, progress_dir / f"{key[:16]}.jsonl", key, progress, concurrency)
    pairs = list(zip(requests, outcomes))
    figures = {"requests": len(requests), "answer_not_supported": 0, "generator_error": 0}
    for _, outcome in pairs:
        if "dropped" in outcome:
            figures[outcome["dropped"]] += 1
    kept = [(r, o) for r, o in pairs if "dropped" not in o]
    duplicates = near_duplicates(kept, duplicate_threshold)
    figures["near_duplicate"] = len(duplicates)
    kept = [(r, o) for r, o in kept if r["id"] not in duplicates]
    balanced = balance(kept, mix)
    figures["trimmed"] = len(kept) - len(balanced)
    synthetic = {"generator": name, "identity": identity, "seed": seed,
                 **{k: generator.identity[k] for k in ("provider", "model", "prompt_version") if k in generator.identity}}
    cases = [case_of(r, o["item"], synthetic, question_field, abstention) for r, o in balanced]
    figures["kinds"] = {kind: sum(1 for c in cases if c["metadata"]["kind"] == kind) for kind in mix}
    return cases, figures
