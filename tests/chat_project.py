"""A small staged RAG assistant with conversations, written into a project for the viewer's tests.

Its retrieval stage takes the history: a follow-up searches with the conversation's first question
and its own, so "And for annual plans?" finds the annual-plan passage. The third turn of
``refund-annual`` retrieves the right passage and fails its answer; the second conversation's id
and second question are script-injection attempts, which every page must show as text. A rubric
judge with ``scope: conversation`` (the offline ``replay`` provider) judges each whole transcript.
"""

from __future__ import annotations

from conftest import Project

PAYLOAD = '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'
HOSTILE = "seats" + PAYLOAD

APP = '''
import re

from oloproof import Passage, Retrieval, rag_system

KNOWLEDGE_BASE = {
    "kb-refunds": "A refund is issued within 14 days of an approved request.",
    "kb-annual": "Annual plans are refunded pro rata for the unused months.",
    "kb-seats": "Seats are added from the billing page by an admin.",
    "kb-hours": "Support answers from 09:00 to 17:00 CET on weekdays.",
}
STOPWORDS = set("a an and are by do does for from how i is it of on the to what when where which with".split())


def terms(text):
    return {w for w in re.findall(r"[a-z0-9:-]+", text.lower()) if w not in STOPWORDS}


@rag_system(name="chat-rag", version="1", depth=3, top_k=1)
class ChatRag:
    def retrieve(self, input, depth, history):
        """A follow-up searches with the conversation's first question and its own."""
        query = (history[0]["input"]["question"] + " " + input["question"]) if history else input["question"]
        wanted = terms(query)
        scored = sorted(((len(wanted & terms(text)), doc_id, text) for doc_id, text in KNOWLEDGE_BASE.items()),
                        key=lambda s: (-s[0], s[1]))
        passages = tuple(Passage(doc_id=d, score=float(s), text=t) for s, d, t in scored[:depth] if s > 0)
        return Retrieval(query=query, depth=depth, candidates=passages)

    def generate(self, input, context):
        return {"answer": context.items[0].text if context.items else "I could not find that."}
'''

CONFIG = '''
system:
  rag: {object: app:ChatRag}
cases: cases.jsonl
evaluators:
  - {type: contains, criterion: answer_correct, field: answer, expected_field: answer}
  - {type: hit_rate, k: 2}
  - {type: rubric_judge, criterion: kept_topic, scope: conversation,
     rubric: "The assistant stays on the topic the customer opened with.",
     provider: replay, model: replay, provider_options: {file: replies.jsonl, default: fail}}
'''

# the replayed judge of the whole transcript: passes the conversation that answers about annual plans
REPLIES = '{"match": "pro rata", "verdict": "pass", "rationale": "Every answer is about refunds."}\n'


def turn(question: str, answer: str, relevant: str | None, **more) -> dict:
    expected = {"answer": answer, "relevant": [{"doc_id": relevant}] if relevant else []}
    return {"input": {"question": question}, "expected": expected, **more}


CASES = [
    {"id": "hours", "input": {"question": "When does support answer?"},
     "expected": {"answer": "09:00", "relevant": [{"doc_id": "kb-hours"}]}},
    {"id": "refund-annual", "metadata": {"topic": "refunds"},
     "turns": [turn("How do I get a refund?", "14 days", "kb-refunds"),
               turn("And for annual plans?", "pro rata", "kb-annual", needs_history=True),
               turn("How long does that take?", "5 business days", "kb-refunds", needs_history=True)]},
    {"id": HOSTILE, "metadata": {"topic": "seats"},
     "turns": [turn("How do I add seats?", "billing page", "kb-seats"),
               turn("And " + PAYLOAD, "nothing like it", None, needs_history=True)]},
]


def chat_project(root) -> Project:
    project = Project(root)
    project.write("app.py", APP)
    project.write("oloproof.yaml", CONFIG)
    project.write("replies.jsonl", REPLIES)
    project.cases(CASES)
    return project
