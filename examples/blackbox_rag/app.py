"""The tutorial's black-box RAG application and its Oloproof adapter.

``support_api`` stands in for an application you already have: it searches a small knowledge
base, builds a prompt from the best sources that fit a word budget, answers and cites. It is
deterministic and needs no credentials. ``run`` calls it unchanged and records what it did as
three typed artifacts.
"""

import re

from oloproof import Context, ContextItem, DroppedItem, Passage, Retrieval, current_case, system

SEARCH_DEPTH = 6  # sources the search returns
TOP_K = 2  # sources the prompt may use
PROMPT_WORD_BUDGET = 40  # words of sources the prompt may hold
EXPAND_QUERY = False  # the candidate change: widen the question with synonyms before searching

KNOWLEDGE_BASE = {
    "kb-01": "Refunds for annual plans are issued within 14 days of an approved request. "
             "Support reviews each request on the same business day, and the customer is told by email "
             "as soon as the decision is made.",
    "kb-02": "Invoices for every plan can be downloaded as PDF files from the billing page.",
    "kb-03": "Team plans include five seats. Additional seats can be added from the billing page at any time.",
    "kb-04": "Security reviews for Enterprise customers cover a penetration test report, the data processing "
             "agreement and a questionnaire answered by the security team within ten business days, with a "
             "follow-up call booked for any open finding.",
    "kb-05": "Seats on a team plan can be reassigned by an admin from the members page.",
    "kb-06": "Support office hours are 09:00 to 17:00 CET on weekdays.",
    "kb-07": "Password resets are requested from the sign-in page, which sends a reset link by email.",
    "kb-08": "Account data can be exported as CSV files from the settings page.",
    "kb-09": "Every refund request on an annual plan is logged in the audit trail, and the same request is "
             "listed again on the day it was reviewed and approved.",
    "kb-10": "Security reviews during Enterprise onboarding include an access review and a written summary for "
             "the customer, and every review is scheduled with the security team of the customer.",
    "kb-11": "Single sign-on supports Okta and Azure AD through SAML.",
    "kb-12": "Data is encrypted at rest with AES-256.",
    "kb-13": "The API rate limit is 100 requests per minute for each key.",
    "kb-14": "Webhooks retry a failed delivery three times with a growing delay.",
    "kb-15": "The free trial lasts 30 days and needs no card.",
    "kb-16": "The Slack integration posts a message for every new ticket.",
}

SYNONYMS = {"money back": "refunds", "yearly": "annual"}
STOPWORDS = set("a an and are as at be by can do does for from how i in is it many my of on or the this to "
                "what when where which who why with".split())


def terms(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9:-]+", text.lower()) if w not in STOPWORDS}


def search(question: str, depth: int) -> list[dict]:
    """Keyword search: the passages sharing the most terms with the question, best first."""
    wanted = terms(question)
    scored = [(len(wanted & terms(text)), doc_id, text) for doc_id, text in KNOWLEDGE_BASE.items()]
    scored = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
    return [{"id": doc_id, "score": float(score), "text": text} for score, doc_id, text in scored[:depth]]


def answer_from(question: str, passage: str) -> str:
    """The model: the sentence of the passage that shares the most terms with the question."""
    sentences = re.split(r"(?<=\.) ", passage)
    wanted = terms(question)
    return max(sentences, key=lambda s: len(wanted & terms(s)))


def override_of(body: dict, word_budget: str | None) -> tuple[list[dict] | None, int | None, int]:
    """The debugging override of a request to the servers: (passages, top_k, word budget) from
    ``override.passages`` and ``override.top_k`` of its JSON ``body`` and its ``X-Word-Budget``
    header (``word_budget``, None when absent). Raises ValueError, TypeError or AttributeError
    when they are malformed."""
    override = body.get("override") or {}
    return (override.get("passages"), override.get("top_k"),
            PROMPT_WORD_BUDGET if word_budget is None else int(word_budget))


def support_api(question: str, passages: list[dict] | None = None, top_k: int | None = None,
                word_budget: int | None = None) -> dict:
    """The application: search, fill the prompt up to the budget, answer from the best source.

    A debugging override, as many services have one: ``passages`` (a list of ``{doc_id, text}``)
    go into the prompt as given, with no search; ``top_k`` and ``word_budget`` replace TOP_K and
    PROMPT_WORD_BUDGET for this request.
    """
    if passages is not None:
        return answer_with(question, [], given(passages), [])
    query = question
    if EXPAND_QUERY:
        for phrase, synonym in SYNONYMS.items():
            if phrase in query.lower():
                query += " " + synonym
    sources = search(query, SEARCH_DEPTH)
    return answer_with(question, sources, *assemble(sources, top_k, word_budget))


def given(passages: list[dict]) -> list[dict]:
    """The override's passages (``{doc_id, text}``) as the prompt's sources, in their order."""
    return [{"id": p["doc_id"], "score": 0.0, "text": p["text"], "rank": rank, "tokens": len(p["text"].split())}
            for rank, p in enumerate(passages, 1)]


def assemble(sources: list[dict], top_k: int | None = None, word_budget: int | None = None) -> tuple[list, list]:
    """The prompt's sources: the first ``top_k`` (TOP_K) that fit ``word_budget`` words
    (PROMPT_WORD_BUDGET); and the others, each with why it was left out."""
    top_k = TOP_K if top_k is None else top_k
    word_budget = PROMPT_WORD_BUDGET if word_budget is None else word_budget
    prompt_sources, skipped, used = [], [], 0
    for rank, source in enumerate(sources, 1):
        words = len(source["text"].split())
        if rank > top_k:
            skipped.append({"id": source["id"], "rank": rank, "why": "top_k"})
        elif used + words > word_budget:
            skipped.append({"id": source["id"], "rank": rank, "why": "token_budget"})
        else:
            used += words
            prompt_sources.append({**source, "rank": rank, "tokens": words})
    return prompt_sources, skipped


def answer_with(question: str, sources: list[dict], prompt_sources: list[dict], skipped: list[dict]) -> dict:
    """The model's answer from the prompt's sources, and what the application did."""
    if not prompt_sources:
        return {"answer": "I could not find that in the knowledge base.", "cited": [], "sources": sources,
                "prompt_sources": [], "skipped": skipped}
    best = prompt_sources[0]
    return {"answer": answer_from(question, best["text"]), "cited": [best["id"]], "sources": sources,
            "prompt_sources": prompt_sources, "skipped": skipped}


@system(
    name="support-rag-blackbox",
    version="tutorial",
    records=("retrieval/v1", "context/v1", "citations/v1"),
)
def run(case):
    response = support_api(str(case["question"]))
    recorder = current_case()
    recorder.retrieval(
        Retrieval(
            query=case["question"],
            depth=SEARCH_DEPTH,
            candidates=tuple(
                Passage(doc_id=s["id"], score=s["score"], text=s["text"])
                for s in response["sources"]
            ),
        )
    )
    recorder.context(
        Context(
            items=tuple(
                ContextItem(doc_id=i["id"], position=i["rank"], tokens=i["tokens"], text=i["text"])
                for i in response["prompt_sources"]
            ),
            dropped=tuple(
                DroppedItem(doc_id=i["id"], position=i["rank"], reason=i["why"])
                for i in response["skipped"]
            ),
            token_budget=PROMPT_WORD_BUDGET,
        )
    )
    recorder.citations(response["cited"])
    return {"answer": response["answer"], "citations": response["cited"]}
