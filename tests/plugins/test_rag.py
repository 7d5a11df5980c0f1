"""The staged ``rag`` system through the real CLI: context assembly, the per-stage caches, YAML
overrides, the errors, the ``relevant_position`` and ``context_truncated`` slices, the shape of
``context/v1`` on both paths, and the support_rag example's documented runs."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import Project, case, olo

STAGED_APP = '''
import json
from pathlib import Path

from oloproof import Passage, Retrieval, rag_system

# read at import: data from outside the methods, which no fingerprint sees
CANDIDATES = json.loads(Path(__file__).with_name("candidates.json").read_text(encoding="utf-8"))
SEPARATOR = " "


def log(stage, input):
    with open("calls.log", "a", encoding="utf-8") as handle:
        handle.write(f"{stage} {input['q']}\\n")


@rag_system(DECORATOR)
class Mini:
    def retrieve(self, input, depth):
        log("retrieve", input)
        rows = CANDIDATES[input["q"]]
        return Retrieval(query=input["q"], depth=depth, candidates=tuple(
            Passage(doc_id=r["doc_id"], score=r.get("score"), text=r["text"], chunk_id=r.get("chunk_id"))
            for r in rows[:depth]))

    def generate(self, input, context):
        log("generate", input)
        ids = [item.doc_id for item in context.items]
        return {"answer": SEPARATOR.join(ids) or "nothing", "citations": ids}

    def count_tokens(self, passage):
        return len(passage.text.split())
'''

# cache: true: these tests watch which judgments each change voids (contains is made every run by default)
EVALUATORS = """
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer, cache: true}
"""


def words(tag: str, n: int) -> str:
    """A passage text of exactly ``n`` words, distinct per tag."""
    return " ".join(f"{tag}w{i}" for i in range(n))


def passage(doc_id: str, n: int, score: float | None = None, chunk_id: str | None = None) -> dict:
    row = {"doc_id": doc_id, "text": words(doc_id + (chunk_id or ""), n)}
    if score is not None:
        row["score"] = score
    if chunk_id is not None:
        row["chunk_id"] = chunk_id
    return row


def staged(root: Path, candidates: dict[str, list[dict]], decorator: str, system: str = "  rag: app:Mini\n",
           relevant: dict[str, list[str]] | None = None, extra: str = "") -> Project:
    """A staged project: ``Mini`` retrieves ``candidates[q]`` and answers with the kept doc ids."""
    project = Project(root)
    project.write("app.py", STAGED_APP.replace("DECORATOR", decorator))
    project.write("candidates.json", json.dumps(candidates))
    project.write("oloproof.yaml", "system:\n" + system + EVALUATORS + extra)
    rows = []
    for q in candidates:
        row = {"id": q, "input": {"q": q}, "expected": {"answer": "d"}}
        if relevant is not None and q in relevant:
            row["expected"]["relevant"] = [dict(zip(("doc_id", "chunk_id"), r.split("#"))) for r in relevant[q]]
        rows.append(row)
    project.cases(rows)
    return project


def run_id(result) -> str:
    return result.out.splitlines()[0].split()[1]


def exported(project: Project, result) -> dict[str, dict]:
    """``oloproof export`` of the run that printed ``result``: case id -> its bundle line."""
    rid = run_id(result)
    assert project.run("export", rid).code == 0
    path = project.root / ".oloproof" / "bundles" / rid / "cases.jsonl"
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def run_json(project: Project, rid: str) -> dict:
    return json.loads((project.root / ".oloproof" / "bundles" / rid / "run.json").read_text(encoding="utf-8"))


def calls(project: Project) -> Counter:
    """How often each stage ran for each case, from the app's own log (then cleared)."""
    log = project.root / "calls.log"
    seen = Counter(log.read_text(encoding="utf-8").splitlines()) if log.exists() else Counter()
    log.unlink(missing_ok=True)
    return seen


def rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("│").split("│")] for line in text.splitlines()
            if line.startswith("│")]


def cache_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("Cache:", "Stages:"))]


# -- context assembly ----------------------------------------------------------------------

ASSEMBLY = {
    # scores deliberately not descending: the retriever's order is the order
    "a": [passage("d1", 5, 0.2), passage("d2", 8, 0.9), passage("d3", 2, 0.5, chunk_id="c7"),
          passage("d4", 1, 0.1), passage("d5", 1, 0.7)],
    # 6 + 4 fills the budget of 10 exactly; the third no longer fits although it is within top_k
    "b": [passage("e1", 6), passage("e2", 4), passage("e3", 1)],
}


@pytest.mark.slow
def test_assembly_keeps_the_retrievers_order_and_drops_by_top_k_then_by_budget(tmp_path):
    project = staged(tmp_path, ASSEMBLY, 'name="mini", version="1", depth=5, top_k=4, token_budget=10')
    result = project.run("run")
    assert result.code == 0, result
    records = exported(project, result)
    text = {p["doc_id"]: p["text"] for rows_ in ASSEMBLY.values() for p in rows_}

    a = records["a"]["artifacts"]
    assert a["retrieval/v1"] == [{"query": "a", "depth": 5, "candidates": ASSEMBLY["a"]}]
    assert a["context/v1"] == [{
        "items": [
            {"doc_id": "d1", "position": 1, "tokens": 5, "text": text["d1"]},
            # d2 (8 tokens) did not fit after d1; the smaller d3 and d4 after it still do
            {"doc_id": "d3", "position": 3, "tokens": 2, "text": text["d3"], "chunk_id": "c7"},
            {"doc_id": "d4", "position": 4, "tokens": 1, "text": text["d4"]},
        ],
        "dropped": [
            {"doc_id": "d2", "position": 2, "reason": "token_budget"},
            # d5 would fit the budget, but it is past top_k: top_k is applied first
            {"doc_id": "d5", "position": 5, "reason": "top_k"},
        ],
        "token_budget": 10,
        "source": "retrieval",
    }]
    assert records["a"]["output"] == {"answer": "d1 d3 d4", "citations": ["d1", "d3", "d4"]}
    assert a["citations/v1"] == [{"ids": ["d1", "d3", "d4"]}]

    b = records["b"]["artifacts"]["context/v1"][0]
    assert [(i["doc_id"], i["position"], i["tokens"]) for i in b["items"]] == [("e1", 1, 6), ("e2", 2, 4)]
    assert b["dropped"] == [{"doc_id": "e3", "position": 3, "reason": "token_budget"}]


@pytest.mark.slow
def test_without_a_budget_only_top_k_drops_and_tokens_are_still_the_systems_count(tmp_path):
    project = staged(tmp_path, {"a": ASSEMBLY["a"]}, 'name="mini", version="1", depth=5, top_k=2')
    result = project.run("run")
    assert result.code == 0, result
    context = exported(project, result)["a"]["artifacts"]["context/v1"][0]
    assert [(i["doc_id"], i["position"], i["tokens"]) for i in context["items"]] == [("d1", 1, 5), ("d2", 2, 8)]
    assert context["dropped"] == [{"doc_id": "d3", "position": 3, "reason": "top_k", "chunk_id": "c7"},
                                  {"doc_id": "d4", "position": 4, "reason": "top_k"},
                                  {"doc_id": "d5", "position": 5, "reason": "top_k"}]
    assert context["token_budget"] is None and context["source"] == "retrieval"


# -- the cache identities --------------------------------------------------------------------

CACHED = {
    "a": [passage("a1", 3), passage("a2", 3), passage("a3", 3)],
    "b": [passage("b1", 8), passage("b2", 8), passage("b3", 1)],
    "c": [passage("c1", 12), passage("c2", 2), passage("c3", 1)],
    "d": [passage("d1", 1)],
    "e": [passage("e1", 4), passage("e2", 4)],
}
CACHED_SYSTEM = """\
  rag:
    object: app:Mini
    top_k: 2
    token_budget: 10
    index_version: v1
"""


def edit(name: str, old: str, new: str) -> Callable[[Project], None]:
    def change(project: Project) -> None:
        text = (project.root / name).read_text(encoding="utf-8")
        assert old in text
        (project.root / name).write_text(text.replace(old, new), encoding="utf-8")

    return change


EVERY = set(CACHED)
CHANGES = {
    # nothing changed: every execution and judgment is served, so no stage runs at all
    "nothing": (lambda project: None,
                "Cache: execution 5 hit/0 miss; judgment 5 hit/0 miss",
                "Stages: retrieve 0 hit/0 miss; generate 0 hit/0 miss", set(), set()),
    # budget 10 -> 30 changes the contexts of b (b2 now fits) and c (c1 now fits) only; context/v1
    # records the budget, but the suite's one evaluator (contains) reads the output alone, so only
    # the judgments of b and c, whose answers changed, miss
    "token_budget": (edit("oloproof.yaml", "token_budget: 10", "token_budget: 30"),
                     "Cache: execution 0 hit/5 miss; judgment 3 hit/2 miss",
                     "Stages: retrieve 5 hit/0 miss; generate 3 hit/2 miss", set(), {"b", "c"}),
    # top_k 2 -> 1 changes a, c and e; b keeps [b1] (only its dropped reasons change, which contains
    # does not read) and d keeps [d1] with nothing dropped, so their judgments are unchanged
    "top_k": (edit("oloproof.yaml", "top_k: 2", "top_k: 1"),
              "Cache: execution 0 hit/5 miss; judgment 2 hit/3 miss",
              "Stages: retrieve 5 hit/0 miss; generate 2 hit/3 miss", set(), {"a", "c", "e"}),
    # a new index version misses every retrieval; the same passages come back, so generation and
    # judgment are reused
    "index_version": (edit("oloproof.yaml", "index_version: v1", "index_version: v2"),
                      "Cache: execution 0 hit/5 miss; judgment 5 hit/0 miss",
                      "Stages: retrieve 0 hit/5 miss; generate 5 hit/0 miss", EVERY, set()),
    "retrieve code": (edit("app.py", 'rows = CANDIDATES[input["q"]]', 'rows = list(CANDIDATES[input["q"]])'),
                      "Cache: execution 0 hit/5 miss; judgment 5 hit/0 miss",
                      "Stages: retrieve 0 hit/5 miss; generate 5 hit/0 miss", EVERY, set()),
    "generate code": (edit("app.py", "ids = [item.doc_id for item in context.items]",
                           "ids = list(item.doc_id for item in context.items)"),
                      "Cache: execution 0 hit/5 miss; judgment 5 hit/0 miss",
                      "Stages: retrieve 5 hit/0 miss; generate 0 hit/5 miss", set(), EVERY),
    # count_tokens is in the execution identity and its counts are in the generate key; these
    # counts are the same, so only the execution misses
    "count_tokens code": (edit("app.py", "return len(passage.text.split())", "return len(passage.text.split(' '))"),
                          "Cache: execution 0 hit/5 miss; judgment 5 hit/0 miss",
                          "Stages: retrieve 5 hit/0 miss; generate 5 hit/0 miss", set(), set()),
    # the system's declared version is in the execution identity only
    "version": (edit("app.py", 'version="1"', 'version="2"'),
                "Cache: execution 0 hit/5 miss; judgment 5 hit/0 miss",
                "Stages: retrieve 5 hit/0 miss; generate 5 hit/0 miss", set(), set()),
}


@pytest.mark.slow
@pytest.mark.parametrize("change", list(CHANGES))
def test_each_change_misses_exactly_the_caches_whose_identity_it_is_part_of(tmp_path, change):
    apply, cache, stages, retrieved, generated = CHANGES[change]
    project = staged(tmp_path, CACHED, 'name="mini", version="1", depth=3', system=CACHED_SYSTEM)
    first = project.run("run")
    assert first.code == 0, first
    assert cache_lines(first.out) == ["Cache: execution 0 hit/5 miss; judgment 0 hit/5 miss",
                                      "Stages: retrieve 0 hit/5 miss; generate 0 hit/5 miss"]
    assert calls(project) == Counter({f"{stage} {q}": 1 for stage in ("retrieve", "generate") for q in CACHED})

    apply(project)
    second = project.run("run")
    assert second.code == 0, second
    assert cache_lines(second.out) == [cache, stages]
    # the system's own log: exactly the stages that missed ran, once each, for those cases only
    assert calls(project) == Counter([f"retrieve {q}" for q in retrieved] + [f"generate {q}" for q in generated])


@pytest.mark.slow
def test_data_loaded_into_a_module_constant_is_part_of_the_stage_identities(tmp_path):
    project = staged(tmp_path, CACHED, 'name="mini", version="1", depth=3', system=CACHED_SYSTEM)
    assert project.run("run").code == 0
    calls(project)
    # CANDIDATES is read from candidates.json at import: the data retrieve reaches has changed
    changed = {**CACHED, "a": [passage("new", 1), *CACHED["a"]]}
    project.write("candidates.json", json.dumps(changed))
    fresh = project.run("run")
    assert cache_lines(fresh.out) == ["Cache: execution 0 hit/5 miss; judgment 4 hit/1 miss",
                                      "Stages: retrieve 0 hit/5 miss; generate 4 hit/1 miss"]
    assert exported(project, fresh)["a"]["output"]["answer"] == "new a1"
    assert calls(project) == Counter([f"retrieve {q}" for q in CACHED] + ["generate a"])


@pytest.mark.slow
def test_data_read_inside_a_method_is_invisible_until_index_version_changes(tmp_path):
    project = staged(tmp_path, CACHED, 'name="mini", version="1", depth=3', system=CACHED_SYSTEM)
    edit("app.py", 'rows = CANDIDATES[input["q"]]',
         'rows = json.loads(Path("candidates.json").read_text(encoding="utf-8"))[input["q"]]')(project)
    assert project.run("run").code == 0
    calls(project)
    # the "index" changes under the same code: a, now led by a new passage
    changed = {**CACHED, "a": [passage("new", 1), *CACHED["a"]]}
    project.write("candidates.json", json.dumps(changed))
    stale = project.run("run")
    assert cache_lines(stale.out)[0] == "Cache: execution 5 hit/0 miss; judgment 5 hit/0 miss"
    assert exported(project, stale)["a"]["output"]["answer"] == "a1 a2"  # the old index's answer
    assert not calls(project)

    edit("oloproof.yaml", "index_version: v1", "index_version: v2")(project)
    fresh = project.run("run")
    assert cache_lines(fresh.out) == ["Cache: execution 0 hit/5 miss; judgment 4 hit/1 miss",
                                      "Stages: retrieve 0 hit/5 miss; generate 4 hit/1 miss"]
    assert exported(project, fresh)["a"]["output"]["answer"] == "new a1"
    assert calls(project) == Counter([f"retrieve {q}" for q in CACHED] + ["generate a"])


@pytest.mark.slow
def test_a_module_level_constant_is_part_of_the_identity_of_the_stages_that_read_it(tmp_path):
    project = staged(tmp_path, CACHED, 'name="mini", version="1", depth=3', system=CACHED_SYSTEM)
    assert project.run("run").code == 0
    edit("app.py", 'SEPARATOR = " "', 'SEPARATOR = ","')(project)
    again = project.run("run")
    # generate reads SEPARATOR, retrieve does not: only the generations run again
    assert cache_lines(again.out) == ["Cache: execution 0 hit/5 miss; judgment 3 hit/2 miss",
                                      "Stages: retrieve 5 hit/0 miss; generate 0 hit/5 miss"]
    assert exported(project, again)["a"]["output"]["answer"] == "a1,a2"


# -- YAML overrides the decorator ------------------------------------------------------------

OVERRIDDEN = {"a": [passage(f"p{i}", 2) for i in range(1, 6)]}


@pytest.mark.slow
def test_system_rag_settings_override_the_decorators(tmp_path):
    decorator = 'name="mini", version="1", depth=2, top_k=1, token_budget=3, index_version="from-decorator"'
    project = staged(tmp_path, OVERRIDDEN, decorator)
    by_decorator = project.run("run")
    assert by_decorator.code == 0, by_decorator
    record = exported(project, by_decorator)["a"]["artifacts"]
    assert record["retrieval/v1"][0]["depth"] == 2 and len(record["retrieval/v1"][0]["candidates"]) == 2
    assert record["context/v1"][0]["token_budget"] == 3
    assert [i["doc_id"] for i in record["context/v1"][0]["items"]] == ["p1"]
    assert record["context/v1"][0]["dropped"] == [{"doc_id": "p2", "position": 2, "reason": "top_k"}]
    identity = run_json(project, run_id(by_decorator))["run"]["system"]["identity"]
    assert (identity["depth"], identity["top_k"], identity["token_budget"], identity["index_version"]) == \
        (2, 1, 3, "from-decorator")

    project.write("oloproof.yaml", "system:\n  rag: {object: app:Mini, depth: 4, top_k: 3, token_budget: 100, "
                                   "index_version: from-yaml}\n" + EVALUATORS)
    by_yaml = project.run("run")
    assert by_yaml.code == 0, by_yaml
    assert "Stages: retrieve 0 hit/1 miss; generate 0 hit/1 miss" in by_yaml.out
    record = exported(project, by_yaml)["a"]["artifacts"]
    assert record["retrieval/v1"][0]["depth"] == 4 and len(record["retrieval/v1"][0]["candidates"]) == 4
    assert record["context/v1"][0]["token_budget"] == 100
    assert [i["doc_id"] for i in record["context/v1"][0]["items"]] == ["p1", "p2", "p3"]
    assert record["context/v1"][0]["dropped"] == [{"doc_id": "p4", "position": 4, "reason": "top_k"}]
    identity = run_json(project, run_id(by_yaml))["run"]["system"]["identity"]
    assert (identity["depth"], identity["top_k"], identity["token_budget"], identity["index_version"]) == \
        (4, 3, 100, "from-yaml")


@pytest.mark.slow
def test_top_k_defaults_to_depth(tmp_path):
    project = staged(tmp_path, OVERRIDDEN, 'name="mini", version="1", depth=3')
    result = project.run("run")
    assert result.code == 0, result
    context = exported(project, result)["a"]["artifacts"]["context/v1"][0]
    assert [i["doc_id"] for i in context["items"]] == ["p1", "p2", "p3"] and context["dropped"] == []


# -- errors ------------------------------------------------------------------------------------

BAD_APP = '''
from oloproof import Passage, Retrieval, rag_system


def found(input, n):
    return Retrieval(query=input["q"], depth=2, candidates=tuple(Passage(doc_id=f"d{i}", text=f"{input['q']} words")
                                                                 for i in range(n)))


class Base:
    def generate(self, input, context):
        return {"answer": "d"}


@rag_system(name="bad", version="1", depth=2)
class TooMany(Base):
    def retrieve(self, input, depth):
        return found(input, depth + 1 if input["q"] == "bad" else depth)


@rag_system(name="bad", version="1", depth=2)
class NotRetrieval(Base):
    def retrieve(self, input, depth):
        return found(input, 1) if input["q"] != "bad" else [Passage(doc_id="d0")]


@rag_system(name="bad", version="1", depth=2, token_budget=10)
class Negative(Base):
    def retrieve(self, input, depth):
        return found(input, 1)

    def count_tokens(self, passage):
        return -1 if passage.text.startswith("bad") else 2


@rag_system(name="bad", version="1", depth=2, token_budget=10)
class NoCount(Base):
    def retrieve(self, input, depth):
        return found(input, 1)


@rag_system(name="bad", version="1", depth=2)
class Fine(Base):
    def retrieve(self, input, depth):
        return found(input, 1)
'''

ERRORS = {
    "more than depth": ("TooMany", "", "case 'c2': retrieve returned 3 candidates for depth 2"),
    "not a Retrieval": ("NotRetrieval", "", "case 'c2': retrieve returned list, not a Retrieval"),
    "negative count": ("Negative", "", "case 'c2': count_tokens returned -1 for d0, not a whole number >= 0"),
    "budget, no count_tokens": ("NoCount", "", "token_budget is set, but app:NoCount has no count_tokens(passage); "
                                              "Oloproof never estimates tokens"),
    "top_k > depth": ("Fine", ", top_k: 3", "$.system.rag: top_k must be between 1 and depth (2), got 3"),
    "top_k 0": ("Fine", ", top_k: 0", "$.system.rag: top_k must be between 1 and depth (2), got 0"),
    "negative budget": ("Fine", ", token_budget: -1", "token_budget must be a whole number >= 0, got -1"),
}


@pytest.mark.parametrize("error", list(ERRORS))
def test_errors_stop_the_run_with_exit_2_in_one_line(tmp_path, error):
    cls, settings, message = ERRORS[error]
    project = Project(tmp_path)
    project.write("app.py", BAD_APP)
    project.write("oloproof.yaml", f"system:\n  rag: {{object: app:{cls}{settings}}}\n" + EVALUATORS)
    project.cases([{"id": "c1", "input": {"q": "good"}, "expected": {"answer": "d"}},
                   {"id": "c2", "input": {"q": "bad"}, "expected": {"answer": "d"}}])
    result = project.run("run")
    assert result.code == 2, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result
    assert message in lines[0]
    assert "fix: " in lines[0] and "Traceback" not in result.text
    assert project.runs() == []


# -- slices -------------------------------------------------------------------------------------

SLICED = {
    "first": [passage("r1", 3), passage("x", 3)],
    "second": [passage("x", 8), passage("r2", 8)],  # relevant at 2, dropped for the budget
    "squeezed": [passage("big", 12), passage("r7", 2)],  # relevant at 2 and kept; big dropped for the budget
    "beyond": [passage("x", 2), passage("y", 2), passage("r3", 2)],  # dropped for top_k: not truncated
    "missed": [passage("x", 2)],
    # two chunks of one document take two positions: the relevant r5 is third, past top_k
    "chunks": [passage("k", 2, chunk_id="1"), passage("k", 2, chunk_id="2"), passage("r5", 2, chunk_id="1")],
    "unlabelled": [passage("r1", 3)],
}
SLICE_LABELS = {"first": ["r1"], "second": ["r2"], "squeezed": ["r7"], "beyond": ["r3"], "missed": ["zz"],
                "chunks": ["r5"]}


def slice_groups(text: str, name: str) -> dict[str, int]:
    """``{group: observed}`` from the slice table's answer_correct rows of slice ``name``."""
    groups = {}
    for row in rows(text):
        if row[0].startswith(name + "=") and row[1] == "answer_correct":
            groups[row[0].split("=", 1)[1]] = int(re.match(r"\d+ / (\d+) observed", row[4]).group(1))
    return groups


def test_relevant_position_and_context_truncated_groups(tmp_path):
    project = staged(tmp_path, SLICED, 'name="mini", version="1", depth=4, top_k=2, token_budget=10',
                     relevant=SLICE_LABELS, extra="slices: [relevant_position, context_truncated]\n")
    result = project.run("run")
    assert result.code == 0, result
    assert slice_groups(result.out, "relevant_position") == {"1": 1, "2": 2, "beyond_top_k": 2, "not_retrieved": 1}
    assert slice_groups(result.out, "context_truncated") == {"yes": 2, "no": 5}


@pytest.mark.parametrize("name", ["relevant_position", "context_truncated"])
def test_position_slices_need_a_staged_system(project, name):
    project.cases([case(i) for i in range(3)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + f"slices: [{name}]\n")
    result = project.run("run")
    assert result.code == 2, result
    if name == "relevant_position":
        assert "slice 'relevant_position' compares relevant positions with top_k, so it needs a staged system" \
            in result.err
    else:
        assert "slice 'context_truncated' compares the assembled context with top_k" in result.err
    assert "oloproof.yaml:" in result.err and "$.slices[0]" in result.err
    assert project.runs() == []


# -- one context/v1 for both paths ------------------------------------------------------------

SHARED = [passage("s1", 5, 0.9), passage("s2", 8, 0.8, chunk_id="c2"), passage("s3", 2, 0.7), passage("s4", 1, 0.6)]

BLACKBOX_APP = '''
import json
from pathlib import Path

from oloproof import Context, ContextItem, DroppedItem, Passage, Retrieval, current_case, system

PASSAGES = json.loads(Path(__file__).with_name("passages.json").read_text(encoding="utf-8"))


def application(question):
    """An application that assembles its own prompt: top 3, then 10 words."""
    kept, skipped, used = [], [], 0
    for rank, p in enumerate(PASSAGES, 1):
        n = len(p["text"].split())
        if rank > 3:
            skipped.append((p, rank, "top_k"))
        elif used + n > 10:
            skipped.append((p, rank, "token_budget"))
        else:
            used += n
            kept.append((p, rank, n))
    return kept, skipped


@system(name="blackbox", version="1", records=("retrieval/v1", "context/v1", "citations/v1"))
def run(input):
    kept, skipped = application(input["q"])
    recorder = current_case()
    recorder.retrieval(Retrieval(query=input["q"], depth=4, candidates=tuple(Passage(**p) for p in PASSAGES)))
    recorder.context(Context(
        items=tuple(ContextItem(doc_id=p["doc_id"], position=r, tokens=n, text=p["text"], chunk_id=p.get("chunk_id"))
                    for p, r, n in kept),
        dropped=tuple(DroppedItem(doc_id=p["doc_id"], position=r, reason=why, chunk_id=p.get("chunk_id"))
                      for p, r, why in skipped),
        token_budget=10))
    ids = [p["doc_id"] for p, _, _ in kept]
    recorder.citations(ids)
    return {"answer": " ".join(ids), "citations": ids}
'''


def shape(value):
    """Keys and value types, recursively: what a reader of the artifact relies on."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


@pytest.mark.slow
def test_staged_and_blackbox_paths_record_the_same_context_shape(tmp_path):
    stage = staged(tmp_path / "staged", {"q": SHARED}, 'name="mini", version="1", depth=4, top_k=3, token_budget=10')
    box = Project(tmp_path / "blackbox")
    box.write("app.py", BLACKBOX_APP)
    box.write("passages.json", json.dumps(SHARED))
    box.write("oloproof.yaml", "system:\n  callable: app:run\n" + EVALUATORS)
    box.cases([{"id": "q", "input": {"q": "q"}, "expected": {"answer": "d"}}])
    records = []
    for project in (stage, box):
        result = project.run("run")
        assert result.code == 0, result
        records.append(exported(project, result)["q"]["artifacts"])
    staged_context, blackbox_context = (r["context/v1"] for r in records)
    assert shape(staged_context) == shape(blackbox_context)
    assert shape(staged_context) == [{
        "items": [{"doc_id": "str", "position": "int", "tokens": "int", "text": "str"}] * 2,
        "dropped": [{"doc_id": "str", "position": "int", "reason": "str", "chunk_id": "str"},
                    {"doc_id": "str", "position": "int", "reason": "str"}],
        "token_budget": "int", "source": "str"}]
    assert staged_context == blackbox_context
    assert records[0]["retrieval/v1"] == records[1]["retrieval/v1"]


@pytest.mark.slow
def test_the_two_tutorial_examples_record_identical_artifacts(tmp_path):
    outputs = {}
    for example in ("support_rag", "blackbox_rag"):
        assert olo("init", "--example", example, example, cwd=tmp_path).code == 0
        project = Project(tmp_path / example)
        result = project.run("run")
        assert result.code in (0, 1, 3), result
        outputs[example] = exported(project, result)
    shared = sorted(set(outputs["support_rag"]) & set(outputs["blackbox_rag"]))
    assert len(shared) == 13
    for case_id in shared:
        staged_art, box_art = (outputs[e][case_id]["artifacts"] for e in ("support_rag", "blackbox_rag"))
        assert staged_art["context/v1"] == box_art["context/v1"], case_id
        assert shape(staged_art["context/v1"]) == shape(box_art["context/v1"])
        assert staged_art["retrieval/v1"] == box_art["retrieval/v1"], case_id


# -- the support_rag example ------------------------------------------------------------------

@pytest.mark.slow
def test_support_rag_prints_the_documented_run_and_the_budget_rerun(tmp_path):
    assert olo("init", "--example", "support_rag", "demo", cwd=tmp_path).code == 0
    project = Project(tmp_path / "demo")
    result = project.run("run")
    assert result.code == 3, result
    table = rows(result.out)
    assert "Gate: BLOCK (exit 3)" in result.out.splitlines()
    for row in (
        ["answer-floor", "answer_correct", "INSUFFICIENT_EVIDENCE", "interval_overlaps_threshold"],
        ["retrieval-floor", "hit_rate_at_2", "INSUFFICIENT_EVIDENCE", "interval_overlaps_threshold"],
        ["citations-valid", "citations_valid", "PASS", "observed_failures_within_limit"],
        ["answer_correct", "69.2%", "[38.5%, 91.0%]", "9 / 13 observed · 0 missing · 0 excluded"],
        ["hit_rate_at_2", "92.3%", "[63.9%, 99.9%]", "12 / 13 observed · 0 missing · 0 excluded"],
        ["recall_at_2", "92.3%", "[63.9%, 99.9%]", "12 / 13 observed · 0 missing · 0 excluded"],
        ["ndcg_at_6", "0.866", "[0.506, 0.990]", "mean of 13 observed · 0 missing · 0 excluded"],
        ["citations_valid", "100.0%", "[75.2%, 100.0%]", "13 / 13 observed · 0 missing · 0 excluded"],
    ):
        assert row in table, row
    assert cache_lines(result.out) == ["Cache: execution 0 hit/13 miss; judgment 0 hit/65 miss",
                                       "Stages: retrieve 0 hit/13 miss; generate 0 hit/13 miss"]
    assert slice_groups(result.out, "relevant_position") == {"1": 10, "2": 2, "not_retrieved": 1}

    # the documented failures, for the documented reasons
    records = exported(project, result)
    failed = {i for i, r in records.items() if r["judgments"]["answer_correct"]["status"] != "pass"}
    assert failed == {"money_back", "refund_review", "security_review", "seat_count"}
    money_back = records["money_back"]["artifacts"]
    assert "kb-01" not in [c["doc_id"] for c in money_back["retrieval/v1"][0]["candidates"]]
    for case_id, relevant in (("refund_review", "kb-01"), ("security_review", "kb-04")):
        artifacts = records[case_id]["artifacts"]
        assert [c["doc_id"] for c in artifacts["retrieval/v1"][0]["candidates"]].index(relevant) == 1
        assert {"doc_id": relevant, "position": 2, "reason": "token_budget"} in artifacts["context/v1"][0]["dropped"]
    assert "five" in records["seat_count"]["output"]["answer"]
    assert records["seat_count"]["expected"]["answer"] == "5 seats"

    edit("oloproof.yaml", "token_budget: 40", "token_budget: 120")(project)
    rerun = project.run("run")
    assert rerun.code in (0, 1, 3), rerun
    assert cache_lines(rerun.out) == ["Cache: execution 0 hit/13 miss; judgment 0 hit/65 miss",
                                      "Stages: retrieve 13 hit/0 miss; generate 7 hit/6 miss"]
