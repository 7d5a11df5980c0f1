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
