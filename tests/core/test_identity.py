"""The JSON encoders built once (``oloproof.json_encoder``): the texts of ``json.JSONEncoder``."""

import json
import math
from pathlib import Path

import pytest

from oloproof import canonical, json_encoder

VALUES = [
    {"b": 1, "a": [1.5, 2, None, True, "é\u2028"], "c": {"z": -0.0, "y": 1e300, "x": "\ud800"}},
    "text", 3, 0.1, None, [], {}, [{"k": [{"d": {}}]}],
]


@pytest.mark.parametrize("sort_keys", [False, True])
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
def test_each_text_is_the_standard_encoder_s(sort_keys, separators):
    fast = json_encoder(sort_keys=sort_keys, separators=separators)
    standard = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, separators=separators).encode
    for value in VALUES:
        assert fast(value) == standard(value)


def test_what_the_standard_encoder_refuses_it_refuses():
    strict = json_encoder(allow_nan=False)
    for value in (math.nan, {"a": [math.inf]}):
        with pytest.raises(ValueError):
            strict(value)
    assert json_encoder()(math.nan) == "NaN"
    with pytest.raises(TypeError):
        json_encoder()({"a": {1, 2}})
    with pytest.raises(TypeError):
        json_encoder(sort_keys=True)({1: "a", "b": 2})
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(RecursionError):
        json_encoder()(cycle)


def test_default_and_the_canonical_text():
    assert json_encoder(default=str)({"p": Path("a/b")}) == '{"p": "a/b"}'
    assert canonical({"b": (1, 2), "a": {"d", "c"}, "p": Path("x")}) == '{"a":["c","d"],"b":[1,2],"p":"x"}'


def test_a_stored_text_reads_back_as_the_value_it_was_made_of():
    """``json_text`` (orjson's text, the json module's for what orjson refuses): every value reads
    back equal, with its types and key order; what neither takes is a TypeError, as before."""
    import datetime

    from oloproof import json_text

    values = [v for v in VALUES if v is not VALUES[0]] + [
        {"b": 1, "a": [1.5, 2, None, True, "é\u2028 漢字"], "c": {"z": -0.0, "y": 1e300, "w": 5e-324}},
        {"big": 2**64, "neg": -(2**63) - 1, "long": 10**40},  # past 64 bits: the json module's text
        {"x": "\ud800"},  # a lone surrogate: the json module's text, which the store's check then refuses
        {"k": (1, 2)},
    ]
    for value in values:
        text = json_text(value)
        back = json.loads(text)
        assert json.dumps(back) == json.dumps(value) and repr(back) == repr(json.loads(json.dumps(value)))
    assert json_text({"b": 1, "a": 2}) == '{"b":1,"a":2}'  # orjson's compact text, the keys in their order
    assert json_text({"big": 10**40}) == '{"big": 10000000000000000000000000000000000000000}'
    for refused in ({"d": datetime.date(2026, 1, 1)}, {"s": {1}}, {"o": object()}):
        with pytest.raises(TypeError):
            json_text(refused)
    assert json_text({1: "a"}) == '{"1": "a"}'  # a key that is not a string: as the json module writes it
