"""A tiny question-answering system over a fixed fact table: deterministic, no credentials.

Replace the body of ``answer`` with a call to your own model or service and keep the decorator.
"""

from oloproof import system

FACTS = {
    "capital of france": "Paris",
    "capital of japan": "Tokyo",
    "capital of kenya": "Nairobi",
    "capital of peru": "Lima",
    "largest planet": "Jupiter",
    "smallest planet": "Mercury",
    "boiling point of water at sea level": "100 °C",
    "chemical symbol for gold": "Au",
    "chemical symbol for iron": "Fe",
    "author of hamlet": "William Shakespeare",
}


@system(name="fact-bot", version="1")
def answer(input):
    question = input["question"].lower().rstrip("?").strip()
    for topic, fact in FACTS.items():
        if topic in question:
            return {"answer": fact}
    return {"answer": "I don't know."}
