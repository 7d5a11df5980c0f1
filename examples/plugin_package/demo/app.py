"""A tiny fact-answering system whose answers vary in length: deterministic, no credentials."""

from oloproof import system

ANSWERS = {
    "capital of france": "Paris.",
    "capital of japan": "Tokyo.",
    "capital of kenya": "The capital of Kenya is Nairobi.",
    "capital of peru": "Lima is the capital of Peru.",
    "largest planet": "Jupiter, the largest planet in the solar system.",
    "smallest planet": "Mercury.",
    "boiling point of water": "Water boils at 100 °C at sea level.",
    "chemical symbol for gold": "Au, from the Latin word aurum, which means shining dawn, "
                                "is the chemical symbol for gold.",
    "chemical symbol for iron": "Fe.",
    "author of hamlet": "William Shakespeare wrote Hamlet, probably between 1599 and 1601, "
                        "and it is his longest play.",
    "speed of light": "About 300,000 kilometres per second.",
}


@system(name="chatty-fact-bot", version="1")
def answer(input):
    question = input["question"].lower().rstrip("?").strip()
    for topic, text in ANSWERS.items():
        if topic in question:
            return {"answer": text}
    return {"answer": "I don't know."}
