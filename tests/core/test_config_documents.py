"""The strict converter (oloproof_core.config.documents.structure) on the sequence types a
plugin's options may have: a YAML list is required, never a string split into its characters."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from attrs import field, make_class

from oloproof import ConfigError
from oloproof_core.config.documents import Document, structure

def options_with(kind: object) -> type:
    """An evaluator's options class, ``criterion: str`` and ``flags`` of type ``kind``."""
    return make_class("Options", {"criterion": field(type=str, default="matches"),
                                  "flags": field(type=kind, factory=tuple)}, frozen=True, kw_only=True)


def loaded(tmp_path, flags: str) -> Document:
    (tmp_path / "oloproof.yaml").write_text(
        "system: {callable: app:run}\ncases: cases.jsonl\nevaluators:\n"
        f"  - type: regex\n    criterion: matches\n    flags: {flags}\n", encoding="utf-8")
    return Document.load(tmp_path / "oloproof.yaml")


def structured(doc: Document, kind: object) -> object:
    data = dict(doc.data["evaluators"][0])
    data.pop("type")
    return structure(doc, data, options_with(kind), ("evaluators", 0), what="evaluator 'regex'")


SEQUENCES = [tuple[str, ...], tuple[str, ...] | None, Sequence[str], list[str], frozenset[str]]
IDS = ["tuple", "optional-tuple", "Sequence", "list", "frozenset"]


@pytest.mark.parametrize("kind", SEQUENCES, ids=IDS)
def test_a_string_where_a_sequence_is_expected_is_a_located_error(tmp_path, kind):
    with pytest.raises(ConfigError) as caught:
        structured(loaded(tmp_path, "IGNORECASE"), kind)
    assert str(caught.value) == ("oloproof.yaml:6:5: $.evaluators[0].flags: expected a list, got 'IGNORECASE' "
                                 "(str); fix: write a list: [IGNORECASE]")


@pytest.mark.parametrize("kind", SEQUENCES, ids=IDS)
def test_a_list_structures_into_the_sequence_type(tmp_path, kind):
    options = structured(loaded(tmp_path, "[IGNORECASE, MULTILINE]"), kind)
    expected = {list: ["IGNORECASE", "MULTILINE"], frozenset: frozenset({"IGNORECASE", "MULTILINE"})}
    origin = getattr(kind, "__origin__", None)
    assert options.flags == expected.get(origin, ("IGNORECASE", "MULTILINE"))


def test_an_item_of_the_wrong_type_is_located_at_its_index(tmp_path):
    with pytest.raises(ConfigError) as caught:
        structured(loaded(tmp_path, "[IGNORECASE, 2]"), tuple[str, ...])
    assert "$.evaluators[0].flags[1]: expected a string, got 2 (int)" in str(caught.value)


def test_a_fixed_length_tuple_needs_its_number_of_items(tmp_path):
    with pytest.raises(ConfigError) as caught:
        structured(loaded(tmp_path, "[IGNORECASE]"), tuple[str, int])
    assert "$.evaluators[0].flags: expected a list of 2 items, got 1" in str(caught.value)
    assert structured(loaded(tmp_path, "[IGNORECASE, 2]"), tuple[str, int]).flags == ("IGNORECASE", 2)
