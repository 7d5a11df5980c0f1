"""The ``json_schema`` evaluator: the output's field is valid against a JSON Schema (the
``jsonschema`` library; the draft its ``$schema`` names, else 2020-12).

The schema is inline (``schema:``) or a JSON file relative to the suite (``schema_file:``); a
schema that is not valid against its draft's metaschema is a configuration error when the suite
loads. A string field is parsed as JSON first (``parse: false`` validates the string itself). A
failing case's reason is the first error, in document order of the output: ``$.items[0].price:
'abc' is not of type 'number'``. ``formats: true`` asserts ``format`` (email, date...), which the
drafts leave as an annotation. ``$ref`` resolves within the schema only: any other is missing
(``unresolvable_ref``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen

from oloproof import ConfigError, EvaluationError, Judgment, digest, hookimpl, select, strict_json


@frozen(kw_only=True)
class Options:
    criterion: str
    schema: dict[str, Any] | None = None  # the schema inline, as YAML or JSON
    schema_file: str | None = None  # a JSON file, relative to the suite's directory
    field: str | None = None  # a dotted path into the output object; None: the whole output
    parse: bool = True  # a string field is a JSON document to parse first
    formats: bool = False  # assert `format` keywords


def checked_schema(schema: Any, key: str) -> Any:
    """The validator class for ``schema``, or a ConfigError at ``key`` saying what is invalid in it."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, Mapping):
        raise ConfigError(f"a JSON Schema is an object, got {type(schema).__name__}", key=key,
                          fix='write an object, e.g. {type: object, required: [answer]}')
    declared = schema.get("$schema")
    cls = validator_for(schema, default=None) if declared is not None else validator_for(schema)
    if cls is None:
        raise ConfigError(f"unknown $schema {declared!r}", key=key,
                          fix="name a draft jsonschema knows (https://json-schema.org/draft/2020-12/schema), or remove $schema")
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ConfigError(f"invalid JSON Schema ({exc.json_path} of the schema): {exc.message}", key=key,
                          fix="correct the schema against its draft (json-schema.org)") from None
    return cls


def read_schema(options: Options, suite_dir: Path) -> tuple[dict, str]:
    """The schema the options name and the key it came from; a ConfigError saying what is wrong."""
    if (options.schema is None) == (options.schema_file is None):
        raise ConfigError("give the schema either inline (schema:) or as a file (schema_file:)",
                          fix="keep exactly one of schema and schema_file")
    if options.schema is not None:
        return options.schema, "schema"
    path = Path(suite_dir) / options.schema_file
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read schema_file {options.schema_file!r}: {exc.strerror or exc}", key="schema_file",
                          fix="give a path relative to the suite's directory") from None
    try:
        return strict_json(data), "schema_file"
    except ValueError as exc:
        raise ConfigError(f"schema_file {options.schema_file!r} is not JSON: {exc}", key="schema_file",
                          fix="write the schema as a JSON file, or inline under schema:") from None


def order(instance: Any) -> Any:
    """A sort key for the errors of ``instance``: their place in it, in document order (an
    object's keys as written, a list's items by index)."""

    def key(error: Any) -> tuple:
        place, node = [], instance
        for part in error.absolute_path:
            if isinstance(node, dict) and part in node:
                place.append(list(node).index(part))
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                place.append(part)
                node = node[part]
            else:
                break
        return tuple(place)

    return key


@frozen
class JsonSchema:
    """Pass when the field is valid against the schema."""

    options: Options
    schema: dict = attrs.field(eq=False, repr=False)
    validator: Any = attrs.field(eq=False, repr=False)
    metric = "proportion"
    cached = False  # in-process and deterministic: made again for less than a cache row costs

    @property
    def criterion(self) -> str:
        return self.options.criterion

    @property
    def identity(self) -> dict:
        # the schema's content, so editing the schema file misses the judgment cache; and the
        # library's version, whose reading of a draft is what decides a case
        from importlib.metadata import version  # not at import: every command loads this plugin

        return {"schema": digest(self.schema), "jsonschema": version("jsonschema")}

    def evaluate(self, case: Any, execution: Any) -> Judgment:
        got = select(execution.output, self.options.field)
        if got is None:
            return Judgment.failed("field_absent", field=self.options.field)
        if isinstance(got, str) and self.options.parse:
            try:
                got = strict_json(got)
            except ValueError as exc:
                return Judgment.failed("invalid_json", field=self.options.field, error=str(exc)[:200])
        from referencing.exceptions import Unresolvable  # jsonschema's own dependency

        try:
            errors = sorted(self.validator.iter_errors(got), key=order(got))
        except Unresolvable as exc:  # a $ref to another document, or to nowhere in this one
            raise EvaluationError(f"unresolvable_ref: {exc}") from exc
        if not errors:
            return Judgment.passed()
        first = errors[0]
        return Judgment.failed(f"{first.json_path}: {first.message[:200]}", field=self.options.field,
                               path=first.json_path, keyword=str(first.validator), errors=len(errors))


def make(options: Options, suite_dir: Path) -> JsonSchema:
    """The evaluator, its schema read and checked when the suite loads."""
    schema, key = read_schema(options, suite_dir)
    cls = checked_schema(schema, key)
    checker = cls.FORMAT_CHECKER if options.formats else None
    return JsonSchema(options, schema, cls(schema, format_checker=checker))


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("json_schema", make, options=Options)
