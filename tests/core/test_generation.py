"""`oloproof generate`: cases from a corpus through the builtin ``llm_generator`` (replay provider
and the local stand-in), its two filters each shown on a planted bad item, the mix, resuming, and
the 50-passage example whose generated cases run as they are on its staged system."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import olo
from oloproof import ConfigError
from oloproof_core.workflows import generation
from oloproof_llm_generator import LLMGenerator, Options
from provider_standin import StandIn

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "unlabelled_rag"
PASSAGES = [{"doc_id": f"d{i}", "chunk_id": str(c), "text": f"Fact {i}.{c}: the widget {i} weighs {i + c} kilograms."}
            for i in range(4) for c in range(2)]


def reply(kind: str, source: str, question: str, answer: str = "x") -> dict:
    return {"match": [f"Question kind: {kind}", f"[{source}]"], "reply": {"question": question, "answer": answer}}


def replay_generator(tmp_path: Path, lines: list[dict], **options) -> LLMGenerator:
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return LLMGenerator(Options(provider="replay", model="replay", provider_options={"file": str(path)}, **options))


def all_factoid(tmp_path, questions: dict[str, str], extra=(), **kw):
    requests = generation.plan(PASSAGES, len(questions), {"factoid": 1.0}, 0)
    lines = [reply("factoid", generation.unit(r["passages"][0]), questions[r["id"]]) for r in requests]
    made = replay_generator(tmp_path, [*extra, *lines, {"match": "Support check", "verdict": "pass"}])
    return generation.generate_cases(made, "llm_generator", PASSAGES, count=len(questions), mix={"factoid": 1.0},
                                     seed=0, progress_dir=tmp_path / "progress", **kw)


def test_a_planted_near_duplicate_question_is_dropped_and_the_first_kept(tmp_path):
    cases, figures = all_factoid(tmp_path, {
        "factoid-001": "How much does widget one weigh in kilograms?",
        "factoid-002": "How much does widget one weigh in kilograms today?",  # the planted near-duplicate
        "factoid-003": "Which colour is the third widget?"})
    assert [c["id"] for c in cases] == ["gen-factoid-001", "gen-factoid-003"]
    assert figures["near_duplicate"] == 1 and figures["answer_not_supported"] == 0
    assert generation.near_duplicates([({"id": "a"}, {"item": {"question": "Where is it?"}}),
                                       ({"id": "b"}, {"item": {"question": "When was it sent?"}})], 0.6) == set()


def test_a_planted_unsupported_answer_is_dropped_by_the_judge(tmp_path):
    planted = {"match": ["Support check", "How heavy is the planted widget?"], "verdict": "fail",
               "rationale": "the passage gives another weight"}
    cases, figures = all_factoid(tmp_path, {"factoid-001": "How heavy is the planted widget?",
                                            "factoid-002": "What does fact two say?"}, extra=[planted])
    assert [c["input"]["question"] for c in cases] == ["What does fact two say?"]
    assert figures["answer_not_supported"] == 1
    kept = json.loads((next((tmp_path / "progress").glob("*.jsonl"))).read_text().splitlines()[0])
    assert kept["dropped"] == "answer_not_supported" and "another weight" in kept["rationale"]


def test_cases_carry_their_passages_and_the_generator_and_the_unanswerable_share_holds(tmp_path):
    mix = {"factoid": 0.25, "two_passage": 0.25, "unanswerable": 0.5}
    requests = generation.plan(PASSAGES, 8, mix, 3)
    lines = [reply(r["kind"], generation.unit(r["passages"][0]), f"Question {r['id']} about {r['passages'][0]['text']}")
             for r in requests]
    lines[0]["reply"]["answer"] = "1 kilograms"
    made = replay_generator(tmp_path, [*lines, {"match": "Support check", "verdict": "pass"}])
    cases, figures = generation.generate_cases(made, "llm_generator", PASSAGES, count=8, mix=mix, seed=3,
                                               progress_dir=tmp_path / "p", duplicate_threshold=1.0)
    assert figures["kinds"] == {"factoid": 2, "two_passage": 2, "unanswerable": 4}
    factoid = next(c for c in cases if c["metadata"]["kind"] == "factoid")
    source = requests[0]["passages"][0]
    assert factoid["expected"]["relevant"] == [{"doc_id": source["doc_id"], "chunk_id": source["chunk_id"], "grade": 2}]
    assert factoid["expected"]["gold_context"][0]["text"] == source["text"]
    assert factoid["metadata"]["synthetic"]["generator"] == "llm_generator"
    assert factoid["metadata"]["synthetic"]["prompt_version"] == "generation/v1"
    pair = next(c for c in cases if c["metadata"]["kind"] == "two_passage")
    assert len(pair["expected"]["relevant"]) == 2 and len({r["doc_id"] for r in pair["expected"]["relevant"]}) == 1
    unanswerable = [c for c in cases if c["metadata"]["kind"] == "unanswerable"]
    assert all(c["expected"] == {"answer": "I don't know.", "relevant": [], "answerable": False} for c in unanswerable)


def test_dropping_keeps_the_asked_mix_by_trimming_the_other_kinds():
    kept = [({"id": f"f{i}", "kind": "factoid"}, {}) for i in range(6)] + [({"id": "u0", "kind": "unanswerable"}, {})]
    balanced = generation.balance(kept, {"factoid": 0.5, "unanswerable": 0.5})
    assert [r["id"] for r, _ in balanced] == ["f0", "u0"]  # one unanswerable left: one factoid beside it


def test_the_plan_is_seeded(tmp_path):
    first = generation.plan(PASSAGES, 6, generation.DEFAULT_MIX, 0)
    assert first == generation.plan(PASSAGES, 6, generation.DEFAULT_MIX, 0)
    assert first != generation.plan(PASSAGES, 6, generation.DEFAULT_MIX, 1)
    assert generation.allocate(6, generation.DEFAULT_MIX) == {"factoid": 3, "two_passage": 1, "paraphrased": 1,
                                                              "unanswerable": 1}


def test_an_interrupted_generation_resumes_and_asks_only_what_is_left(tmp_path):
    with StandIn() as standin:
        for p in PASSAGES:
            name = generation.unit(p)
            standin.rules.append((f"[{name}]", json.dumps({"question": f"What does {name} say?", "answer": "a fact"})))
        made = LLMGenerator(Options(provider="openai", model="standin", check=False, provider_options={
            "base_url": standin.openai_url, "api_key_env": None}))

        def stop_after_three(done, total, dropped, spent):
            if done == 3:
                raise KeyboardInterrupt

        run = dict(count=5, mix={"factoid": 1.0}, seed=0, progress_dir=tmp_path)
        with pytest.raises(KeyboardInterrupt):
            generation.generate_cases(made, "llm_generator", PASSAGES, progress=stop_after_three, **run)
        assert len(standin.requests) == 3
        cases, _ = generation.generate_cases(made, "llm_generator", PASSAGES, **run)
        assert len(standin.requests) == 5 and len(cases) == 5  # two asked, three resumed
        generation.generate_cases(made, "llm_generator", PASSAGES, **run)
        assert len(standin.requests) == 5  # finished: nothing asked again
        assert "[d" in standin.requests[0]["prompt"] and standin.requests[0]["system"].startswith("You write")


def test_a_bad_corpus_line_and_a_bad_mix_are_located(tmp_path):
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"doc_id": "a", "text": "ok"}\n{"doc_id": "", "text": "no id"}\n', encoding="utf-8")
    with pytest.raises(ConfigError) as bad:
        generation.read_corpus(str(corpus))
    assert bad.value.where == f"{corpus}:2" and "doc_id" in bad.value.problem
    with pytest.raises(ConfigError, match="add up to 0.9"):
        generation.parse_mix("factoid=0.5,unanswerable=0.4", generation.KINDS)
    with pytest.raises(ConfigError, match="'riddle=1' is not KIND=SHARE"):
        generation.parse_mix("riddle=1", generation.KINDS)


@pytest.mark.slow
def test_the_50_passage_example_generates_cases_that_run_as_they_are(tmp_path):
    root = tmp_path / "p"
    shutil.copytree(EXAMPLE, root)
    (root / "cases.jsonl").unlink()
    args = ["generate", "--corpus", "passages.jsonl", "--provider", "replay", "--model", "replay",
            "--provider-option", "file=generation.jsonl"]
    dry = olo(*args, "--dry-run", cwd=root)
    assert dry.code == 0 and "Estimate: at most 36 calls" in dry.out and not (root / "cases.generated.jsonl").exists()
    made = olo(*args, cwd=root)
    assert made.code == 0, made
    assert "Dropped: 1 answer not supported by its passages (judged by replay), 1 near-duplicate question" in made.out
    cases = [json.loads(line) for line in (root / "cases.generated.jsonl").read_text(encoding="utf-8").splitlines()]
    index = {(p["doc_id"], p["chunk_id"]) for p in map(json.loads, (root / "passages.jsonl").read_text().splitlines())}
    assert len(index) == 50
    for case in cases:  # every gold passage is retrievable by its id
        for label in case["expected"]["relevant"]:
            assert (label["doc_id"], label["chunk_id"]) in index
    kinds = [c["metadata"]["kind"] for c in cases]
    assert kinds.count("unanswerable") == generation.allocate(len(cases), generation.DEFAULT_MIX)["unanswerable"]
    from_index = olo("generate", *args[3:], "--output", "from-index.jsonl", cwd=root)  # the system's own passages()
    assert from_index.code == 0 and "of the system's index" in from_index.out
    assert (root / "from-index.jsonl").read_text() == (root / "cases.generated.jsonl").read_text()
    shutil.copy(root / "cases.generated.jsonl", root / "cases.jsonl")
    run = olo("run", cwd=root)
    assert run.code in (0, 1, 3), run
    assert f"/ {len(cases)} observed · 0 missing" in run.out


@pytest.mark.slow
def test_bad_input_stops_with_one_located_line_and_writes_nothing(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "p")
    root = tmp_path / "p"
    replay = ["--provider", "replay", "--model", "replay", "--provider-option", "file=generation.jsonl"]
    for args, line in [
        (["--corpus", "passages.jsonl"], "error: --provider: missing required key 'provider'; fix: give --provider NAME"),
        (["--corpus", "passages.jsonl", *replay, "--option", "chek=false"],
         "error: --option chek: unknown key 'chek'; fix: rename it to 'check'"),
        (["--corpus", "passages.jsonl", *replay, "--mix", "factoid=0.5"],
         "error: --mix: the shares add up to 0.5, not 1; fix: make the shares add up to 1"),
        (["--corpus", "missing.jsonl", *replay], "error: --corpus: cannot read the corpus missing.jsonl"),
    ]:
        result = olo("generate", *args, cwd=root)
        assert result.code == 2 and result.err.strip().startswith(line), (args, result)
        assert len(result.err.strip().splitlines()) == 1
    assert not (root / "cases.generated.jsonl").exists() and not (root / ".oloproof" / "generate").exists()


def test_requests_run_concurrently_and_the_cases_keep_the_plan_order(tmp_path):
    from provider_standin import Fault

    with StandIn() as standin:
        for p in PASSAGES:
            name = generation.unit(p)
            standin.rules.append((f"[{name}]", json.dumps({"question": f"What does {name} say?", "answer": "a fact"})))
        standin.faults.extend(Fault("slow", 0.3) for _ in range(4))
        made = LLMGenerator(Options(provider="openai", model="standin", check=False, provider_options={
            "base_url": standin.openai_url, "api_key_env": None}))
        run = dict(count=6, mix={"factoid": 1.0}, seed=0)
        together, _ = generation.generate_cases(made, "llm_generator", PASSAGES, progress_dir=tmp_path / "a",
                                                concurrency=4, **run)
        assert standin.max_in_flight > 1
        alone, _ = generation.generate_cases(made, "llm_generator", PASSAGES, progress_dir=tmp_path / "b", **run)
        assert together == alone and [c["id"] for c in alone] == [f"gen-factoid-00{i}" for i in range(1, 7)]
