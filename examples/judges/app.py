"""A small support assistant to try LLM judges on, with no key: the judge in oloproof.yaml is the
``replay`` provider, which reads its verdicts from replies.jsonl. It is not a model."""

from oloproof import Context, ContextItem, current_case, system

PASSAGES = {
    "refunds": "Refunds for annual plans take 14 days to reach the card.",
    "seats": "Team plans include five seats; more seats cost 8 euros each.",
    "hours": "Support answers from 9 to 17, Monday to Friday.",
    "export": "Data can be exported as CSV from the Settings page.",
    "sso": "Single sign-on is available on the Enterprise plan.",
    "trial": "The free trial lasts 30 days and needs no card.",
}
# Each topic's answers; case variant k gets the answer k modulo their number.
ANSWERS = {
    "refunds": ["Refunds take 14 days.", "Refunds take 14 days on every plan."],
    "seats": ["Team plans include ten seats.", "Team plans include five seats."],
    "hours": ["Support answers from 9 to 17 on weekdays."],
    "export": ["Export your data as CSV from Settings.", "Export your data as CSV or PDF from Settings."],
    "sso": ["Single sign-on comes with every plan.", "Single sign-on is on the Enterprise plan."],
    "trial": ["The trial lasts 30 days, no card needed.", "The trial lasts 60 days."],
}


@system(name="support-bot", version="1", records=("context/v1",))
def answer(input: dict) -> dict:
    topic = input["topic"]
    current_case().context(Context(items=(ContextItem(doc_id=topic, position=1, text=PASSAGES[topic]),)))
    answers = ANSWERS[topic]
    return {"answer": answers[input.get("variant", 0) % len(answers)]}
