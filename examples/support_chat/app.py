"""The conversations example: a staged support assistant that answers follow-up questions.

Deterministic stand-ins for a real retriever and a real model, so the example needs no
credentials. A follow-up ("And for annual plans?") means nothing on its own, so ``retrieve``
rewrites it from the conversation before searching, and records the rewritten query as its
``Retrieval.query`` (Oloproof keeps it as the turn's ``query_rewrite/v1``). ``generate`` answers
from the first passage of the context. Replace the bodies with calls to your query rewriter, your
index and your model; keep the decorator and the signatures.

The stand-ins have the faults real ones have, so that a run has failures to find:

- the rewrite keeps the earlier question's terms first and cuts the query at ``MAX_QUERY_TERMS``,
  so after a long question the follow-up's own constraint can be cut off;
- the model picks its sentence by the last message alone, not the conversation;
- the context holds what fits ``token_budget`` words, and a long first passage leaves no room.
"""

import re

from oloproof import Passage, Retrieval, rag_system

KNOWLEDGE_BASE = {
    "kb-01": "Refunds on monthly plans are paid back to the original card within 5 business days.",
    "kb-02": "Password resets are requested from the sign-in page, which sends a reset link by email.",
    "kb-03": "Invoices are emailed to the billing contact at the start of each billing period and can be "
             "downloaded as PDF files from the billing page.",
    "kb-04": "Annual plans are invoiced once a year, and the invoice can be paid by bank transfer within 30 days.",
    "kb-05": "The Starter plan costs 12 euros per user per month. The Team plan costs 25 euros per user per month.",
    "kb-06": "Paying yearly saves two months: an annual plan costs ten times the monthly price.",
    "kb-07": "Team plans include five seats. Extra seats are added from the billing page at any time.",
    "kb-08": "Seats removed in the middle of a billing period are credited on the next invoice, not refunded.",
    "kb-09": "A monthly plan can be cancelled at any time from the billing page and stays active until the end "
             "of the month.",
    "kb-10": "An annual plan can be cancelled within its first 30 days for a full refund. After that, it stays "
             "active to the end of the year and is not renewed.",
    "kb-11": "The free trial lasts 30 days and needs no card.",
    "kb-12": "Refunds on annual plans take up to 14 days and cover the unused months, pro rata.",
    "kb-13": "Cards and SEPA direct debit are accepted on every plan; bank transfer is offered on annual plans only.",
    "kb-14": "When the free trial ends, the workspace becomes read-only until a plan is chosen.",
    "kb-15": "Single sign-on with Okta or Azure AD is part of the Enterprise plan.",
    "kb-16": "Enterprise plans are quoted by the sales team and include a named account manager, a security "
             "review with a penetration test report, a data processing agreement, priority support and an "
             "uptime commitment.",
    "kb-17": "Invoices show VAT for customers in the EU; a VAT number is added on the billing page.",
    "kb-18": "Plans are billed in one currency, euros, US dollars or pounds, chosen when the plan is bought.",
    "kb-19": "Account data can be exported as CSV files from the settings page by an admin.",
    "kb-20": "Support answers tickets from 09:00 to 17:00 CET on weekdays; Enterprise tickets get a reply "
             "within four hours.",
}

STOPWORDS = set("a an and are as at be by can do does for from how i if in is it its many me my of on or so "
                "the them then they this that to what when where which who why will with about also same "
                "there get have has our plan plans".split())
FOLLOW_UP = re.compile(r"^(and|what about|how about|same for|also|then)\b|\b(it|its|that|they|them|those|this)\b",
                       re.IGNORECASE)
MAX_QUERY_TERMS = 7  # the search engine's query length limit, in terms
PLANS = {"monthly", "annual", "starter", "team", "enterpris", "trial"}  # stemmed


def stem(word: str) -> str:
    """A light stemmer: refunds, refunded and refund are one term."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[:-len(suffix)]
            break
    return word[:-1] if len(word) > 4 and word[-1] == word[-2] and word[-1].isalpha() else word


def words(text: str) -> list[str]:
    """The content words of ``text``, in order, each stem once."""
    found, seen = [], set()
    for word in (w.strip(".,;:?!") for w in text.lower().split()):
        if word and word not in STOPWORDS and stem(word) not in seen:
            seen.add(stem(word))
            found.append(word)
    return found


def terms(text: str) -> set[str]:
    """What the search matches on: the stems of the content words."""
    return {stem(w) for w in words(text)}


def is_follow_up(question: str) -> bool:
    return bool(FOLLOW_UP.search(question))


def rewrite(question: str, history: list) -> str:
    """The query to search for: the question itself, or, for a follow-up, the words of the last
    question that stood on its own (less the plan it named, when the follow-up names another),
    then the follow-up's, cut at MAX_QUERY_TERMS."""
    if not is_follow_up(question):
        return question
    earlier = [turn["input"]["question"] for turn in history if not is_follow_up(turn["input"]["question"])]
    if not earlier:
        return question
    carried = words(earlier[-1])
    if PLANS & terms(question):
        carried = [w for w in carried if stem(w) not in PLANS]
    seen = {stem(w) for w in carried}
    return " ".join((carried + [w for w in words(question) if stem(w) not in seen])[:MAX_QUERY_TERMS])


@rag_system(
    name="support-chat",
    version="conversations-example",
    depth=4,
    top_k=2,
    token_budget=40,
    index_version="kb-2026-11-30",
)
class SupportChat:
    def retrieve(self, input, depth, history=()):
        """Rewrite a follow-up from the conversation, then keyword search: the passages sharing the
        most terms with the query, best first."""
        query = rewrite(input["question"], list(history))
        wanted = terms(query)
        scored = [(len(wanted & terms(text)), doc_id, text) for doc_id, text in KNOWLEDGE_BASE.items()]
        scored = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        passages = [Passage(doc_id=doc_id, score=float(score), text=text) for score, doc_id, text in scored[:depth]]
        return Retrieval(query=query, depth=depth, candidates=tuple(passages))

    def generate(self, input, context, history=()):
        """The model: answers from the first passage of the context with the sentence nearest the
        last message (the conversation before it is not read), and cites the passage."""
        if not context.items:
            return {"answer": "I could not find that in the knowledge base.", "citations": []}
        best = context.items[0]
        sentences = re.split(r"(?<=\.) ", best.text or "")
        wanted = terms(input["question"])
        answer = max(sentences, key=lambda s: len(wanted & terms(s)))
        return {"answer": answer, "citations": [best.doc_id]}

    def count_tokens(self, passage):
        return len((passage.text or "").split())
