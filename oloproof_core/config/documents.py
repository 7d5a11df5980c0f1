"""YAML and JSONL -> frozen objects: the loader, the strict converter, and located errors."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSequence, MutableSet, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, get_args, get_origin

import cattrs
from attrs import fields, has
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from oloproof_core.model.errors import ConfigError
from oloproof_core.config.files import (
    MAX_YAML_BYTES, MAX_YAML_NODES, check_aliases, check_text, check_yaml_shape, parse_json_line, read_lines,
    read_text,
)

Path_ = tuple  # a YAML path: keys and indices


def yaml_path(path: Sequence) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class Document:
    """A loaded YAML file: plain data, plus the line and column of every node for messages."""

    def __init__(self, path: Path, tree: Any):
        self.path, self.tree = path, tree
        self.data = _plain(tree)

    @classmethod
    def load(cls, path: Path, *, limit: int = MAX_YAML_BYTES, nodes: int = MAX_YAML_NODES,
             fix: str = "create it, or pass another file with --config") -> Document:
        """``path`` read within ``limit`` bytes and ``nodes`` values, its aliases expanded."""
        from ruamel.yaml import YAML
        from ruamel.yaml.error import MarkedYAMLError, YAMLError

        text = read_text(path, limit=limit, fix=fix)
        check_yaml_shape(text, path)
        try:
            if "&" in text and "*" in text:  # anchors and aliases: count what they expand to first
                check_aliases(YAML(typ="rt").parse(text), path, nodes)
            tree = YAML(typ="rt").load(text)
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f"{path.name}:{mark.line + 1}:{mark.column + 1}" if mark else path.name
            raise ConfigError(f"invalid YAML: {exc.problem or exc.context}", where=where,
                              fix="check the indentation and quoting on that line") from None
        except YAMLError as exc:  # a character YAML does not allow, say
            raise ConfigError(f"invalid YAML: {str(exc).splitlines()[0]}", where=path.name,
                              fix="check the file's text") from None
        except RecursionError:
            raise ConfigError("nested too deeply", where=path.name, fix="flatten the file") from None
        document = cls(path, tree if tree is not None else {})
        check_text(document.data, "$", path.name)  # "\ud800" in double quotes is no character
        return document

    def where(self, path: Sequence = ()) -> str:
        """``file:line:col: $.yaml.path`` of the deepest node of ``path`` that exists."""
        line, col, node = 1, 1, self.tree
        for part in path:
            lc = getattr(node, "lc", None)
            try:
                if lc is not None:
                    pos = lc.key(part) if isinstance(part, str) else lc.item(part)
                    line, col = pos[0] + 1, pos[1] + 1
                node = node[part]
            except (KeyError, IndexError, TypeError, AttributeError):
                break
        return f"{self.path.name}:{line}:{col}: {yaml_path(path)}"


def _plain(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


# -- the converter ---------------------------------------------------------------------------


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"expected a string, got {_describe(value)}", fix="quote the value")
    return value


def _strict_int(value: Any, _: type) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"expected an integer, got {_describe(value)}", fix="write a whole number")
    return value


def _strict_float(value: Any, _: type) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"expected a number, got {_describe(value)}", fix="write a number such as 0.95")
    return float(value)


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        note = " (YAML 1.2 reads yes/no/on/off as strings)" if isinstance(value, str) else ""
        raise ConfigError(f"expected true or false, got {_describe(value)}{note}", fix="write true or false")
    return value


# each sequence or set type an option may have -> the type its value is built as
_SEQUENCES = {list: list, MutableSequence: list, tuple: tuple, Sequence: tuple,
              set: set, MutableSet: set, frozenset: frozenset, AbstractSet: frozenset}


def _is_sequence(cls: Any) -> bool:
    """``list[...]``, ``tuple[...]``, ``Sequence[...]`` and the set types, bare or parametrised."""
    origin = get_origin(cls) or cls
    return isinstance(origin, type) and origin in _SEQUENCES


def _list_fix(value: Any) -> str:
    """How to write ``value`` as a list: ``[IGNORECASE]`` for one string or number."""
    if isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return f"write a list: [{value}]"
    return "write [a, b], or one `- item` a line"


def _strict_sequence(converter: cattrs.Converter) -> Any:
    """Lists, tuples, sequences and sets must be YAML lists: cattrs alone would split
    ``slices: metadata.topic`` or ``flags: IGNORECASE`` into characters."""
    from cattrs.errors import IterableValidationNote

    def factory(cls: type) -> Any:
        origin = get_origin(cls) or cls
        build = _SEQUENCES[origin]
        args = get_args(cls)
        fixed = origin is tuple and bool(args) and args[-1] is not Ellipsis  # tuple[str, int]: one type a place
        item = args[0] if args else Any
        places = ", ".join(getattr(a, "__name__", str(a)) for a in args) if fixed else ""

        def hook(value: Any, _: type) -> Any:
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"expected a list, got {_describe(value)}", fix=_list_fix(value))
            if fixed and len(value) != len(args):
                raise ConfigError(f"expected a list of {len(args)} items, got {len(value)}",
                                  fix=f"write one item a place: [{places}]")
            out, errors = [], []
            for i, element in enumerate(value):
                kind = args[i] if fixed else item
                try:
                    out.append(element if kind is Any else converter.structure(element, kind))
                except Exception as exc:  # noqa: BLE001 - collected and re-raised with their index
                    exc.__notes__ = [*getattr(exc, "__notes__", []),
                                     IterableValidationNote(f"Structuring {cls} @ index {i}", i, kind)]
                    errors.append(exc)
            if errors:
                raise IterableValidationError(f"While structuring {cls!r}", errors, cls)
            return build(out)

        return hook

    return factory


def _strict_dict(converter: cattrs.Converter) -> Any:
    """Mappings must be mappings, with a message that says so."""
    from cattrs.gen import make_mapping_structure_fn

    def factory(cls: type) -> Any:
        inner = make_mapping_structure_fn(cls, converter) if get_args(cls) else None

        def hook(value: Any, _: type) -> dict:
            if not isinstance(value, dict):
                raise ConfigError(f"expected a mapping, got {_describe(value)}",
                                  fix="write {key: value, ...}, or one `key: value` a line")
            return inner(value, cls) if inner is not None else dict(value)

        return hook

    return factory


def make_converter() -> cattrs.Converter:
    """The one converter: extra keys forbidden, scalars never coerced, sequences and mappings checked."""
    converter = cattrs.Converter(forbid_extra_keys=True)
    for cls, hook in ((str, _strict_str), (int, _strict_int), (float, _strict_float), (bool, _strict_bool)):
        converter.register_structure_hook(cls, hook)
    converter.register_structure_hook_factory(_is_sequence, _strict_sequence(converter))
    converter.register_structure_hook_factory(lambda t: t is dict or get_origin(t) in (dict, Mapping),
                                              _strict_dict(converter))
    converter.register_structure_hook(str | dict, _name_or_mapping)
    return converter


def _name_or_mapping(value: Any, _: type) -> Any:
    """A name or a mapping (a ``slices:`` entry), checked further by whoever reads it."""
    if not isinstance(value, (str, dict)):
        raise ConfigError(f"expected a name or a mapping, got {_describe(value)}",
                          fix="write a name, or {key: value, ...}")
    return value


CONVERTER = make_converter()


def _flatten(exc: BaseException, path: tuple) -> list[tuple[tuple, BaseException]]:
    if isinstance(exc, ForbiddenExtraKeysError):
        return [(path + (key,), exc) for key in sorted(exc.extra_fields)]
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        with_notes, others = exc.group_exceptions()
        out = []
        for sub, note in with_notes:
            part = getattr(note, "name", getattr(note, "index", None))
            out += _flatten(sub, path + ((part,) if part is not None else ()))
        for sub in others:
            out += _flatten(sub, path)
        return out
    return [(path, exc)]


INTERNAL = "oloproof_internal"  # attrs field metadata: a field the code fills in, never a key of the YAML


def _accepted(cls: type) -> list[str]:
    return [f.name for f in fields(cls) if not f.metadata.get(INTERNAL)] if has(cls) else []


def _unknown_key(doc: Document | None, at: tuple, cls: type, what: str) -> ConfigError:
    allowed = _accepted(cls)
    where = doc.where(at) if doc else yaml_path(at)
    close = difflib.get_close_matches(str(at[-1]), allowed, n=1)
    fix = f"rename it to {close[0]!r}" if close else (
        f"remove it; {what or 'this block'} accepts: {', '.join(allowed)}" if allowed else "remove it")
    return ConfigError(f"unknown key {at[-1]!r}", where=where, fix=fix)


def structure(doc: Document | None, data: Any, cls: type, path: tuple = (), *, what: str = "") -> Any:
    """Structure ``data`` into ``cls``, raising one ConfigError located at the first problem."""
    if has(cls) and isinstance(data, Mapping):
        for f in fields(cls):
            if f.metadata.get(INTERNAL) and f.name in data:
                raise _unknown_key(doc, path + (f.name,), cls, what)
    try:
        return CONVERTER.structure(data, cls)
    except (ClassValidationError, IterableValidationError, ForbiddenExtraKeysError, ConfigError,
            ValueError, TypeError) as exc:
        # an unknown key first: a misspelt key also makes its real name look missing
        problems = sorted(_flatten(exc, path), key=lambda p: not isinstance(p[1], ForbiddenExtraKeysError))
        at, err = problems[0]
        where = doc.where(at) if doc else yaml_path(at)
        if isinstance(err, ForbiddenExtraKeysError):
            raise _unknown_key(doc, at, err.cl, what) from None
        if isinstance(err, ConfigError):
            if err.key is not None:  # raised by a validator of that key
                where = doc.where(at + (err.key,)) if doc else yaml_path(at + (err.key,))
            raise ConfigError(err.problem, where=where, fix=err.fix) from None
        if isinstance(err, KeyError):
            name = str(err.args[0]) if err.args else "?"
            raise ConfigError(f"missing required key {name!r}", where=where,
                              fix=f"add `{name}:` here") from None
        raise ConfigError(f"invalid value: {err}", where=where) from None


# -- JSONL records --------------------------------------------------------------------------


class SeenIds:
    """The ids of a file read so far, for the duplicate-id check: where each was first seen while
    they are few; past ``EXACT`` ids, an 8-byte hash each (a million ids in 8 MB), kept in 256
    parts by the hash's top byte and checked for repeats by :meth:`repeated` once the file is read."""

    EXACT = 50_000
    SORTED = 150_000  # up to this many hashes are sorted together; more, one part at a time

    def __init__(self, exact: float = EXACT) -> None:
        self.exact = exact  # math.inf: always exact (a file read whole anyway)
        self.first: dict[str, str] = {}
        self.parts: list | None = None  # 256 array('q') once past EXACT ids, by the hash's top byte
        self.hashed = 0

    @property
    def digests(self) -> list[int]:
        """Every hash kept (in no particular order)."""
        return [d for part in self.parts or () for d in part]

    def __len__(self) -> int:
        return len(self.first) + self.hashed

    def seen(self, case_id: str) -> str | None:
        """Where ``case_id`` was first seen, when that is still known exactly."""
        return self.first.get(case_id)

    def add(self, case_id: str, here: str) -> None:
        if self.parts is None and len(self.first) < self.exact:
            self.first[case_id] = here
            return
        if self.parts is None:
            from array import array

            self.parts = [array("q") for _ in range(256)]
            for known in self.first:
                self._hash(known)
        self._hash(case_id)

    def _hash(self, case_id: str) -> None:
        digest = _id_digest(case_id)
        self.parts[digest >> 56].append(digest)  # the top byte, -128..127: one part each
        self.hashed += 1

    def repeated(self) -> set[int]:
        """The hashes seen more than once (after the exact part): usually none. A repeat has its
        top byte in common with its first, so each part is sorted on its own once there are many
        (one part of some 4,000 hashes at a time beside the 8 bytes an id): no copy of them all,
        and nothing imported (numpy alone would add some 20 MB to a run that computes no interval
        with it)."""
        if self.parts is None or self.hashed < 2:
            return set()
        from itertools import chain, pairwise

        if self.hashed <= self.SORTED:
            return {a for a, b in pairwise(sorted(chain.from_iterable(self.parts))) if a == b}
        found: set[int] = set()
        for part in self.parts:
            found.update(a for a, b in pairwise(sorted(part)) if a == b)
        return found


def _id_digest(case_id: str) -> int:
    """Python's own 64-bit hash of the string (SipHash, keyed afresh by each process): as unlikely
    to collide as any 8-byte digest, and a collision costs only the second read that locates a
    repeat, which compares the ids themselves."""
    return hash(case_id)


def check_record(obj: Any, where: str, at: str, first: SeenIds, here: str, *, what: str,
                 keys: tuple[str, ...], example: str) -> None:
    """One record of a case or label file: an object with a unique non-empty string ``id`` and no
    field outside ``keys``. ``at`` is its JSON path (``$``, or ``$[3]`` in a JSON array); ``first``
    holds each id seen and where (``on line 3``), and ``here`` says where this one is. A repeat
    among many ids is found by :func:`check_repeats` once the file is read."""
    if not isinstance(obj, dict):
        raise ConfigError(f"expected a JSON object, got {type(obj).__name__}", where=where,
                          fix=f"write one object per {what}: {example}")
    for key in obj:
        if key not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            raise ConfigError(f"{at}.{key}: unknown field {key!r}", where=where,
                              fix=f"rename it to {close[0]!r}" if close else f"a {what} has only {', '.join(keys)}")
    if "id" not in obj:
        raise ConfigError(f"{at}.id: missing id", where=where, fix=f"write {example}")
    if not isinstance(obj["id"], str) or not obj["id"]:
        raise ConfigError(f"{at}.id: expected a non-empty string, got {_describe(obj['id'])}", where=where,
                          fix="quote the id")
    earlier = first.seen(obj["id"])
    if earlier is not None:
        _duplicate(obj["id"], earlier, at, where, what)
    first.add(obj["id"], here)


def _duplicate(case_id: str, earlier: str, at: str, where: str, what: str) -> None:
    raise ConfigError(f"{at}.id: duplicate id {case_id!r} (first {earlier})", where=where,
                      fix=f"give every {what} its own id")


def check_repeats(first: SeenIds, records: Callable[[], Iterable[tuple[str, str, str, Any]]], what: str) -> None:
    """After a file was read: a repeated id among many is located by reading it again
    (``records()`` yields where, JSON path, how a duplicate names it, and the object), and raised as
    :func:`check_record` would have."""
    repeated = first.repeated()
    if not repeated:
        return
    places: dict[str, str] = {}
    for where, at, here, obj in records():
        case_id = obj["id"]
        if _id_digest(case_id) in repeated:
            if case_id in places:
                _duplicate(case_id, places[case_id], at, where, what)
            places[case_id] = here


def read_jsonl(path: Path, *, what: str, keys: tuple[str, ...], example: str,
               missing_fix: str) -> Iterator[tuple[str, dict]]:
    """One JSON object a line (blank lines skipped), each checked by :func:`check_record`; yields
    ``("file:line", object)``. Every problem is a ConfigError naming the line and the fix; an
    empty file too."""
    name = path.name

    def records() -> Iterator[tuple[str, str, str, Any]]:  # where, JSON path, how a duplicate names it, object
        for number, line in read_lines(path, what=what, missing_fix=missing_fix):
            if line.strip():  # a blank line is skipped
                where = f"{name}:{number}"
                yield where, "$", f"on line {number}", parse_json_line(line, where)

    first = SeenIds()
    for where, at, here, obj in records():
        check_record(obj, where, at, first, here, what=f"{what} line", keys=keys, example=example)
        yield where, obj
    check_repeats(first, records, f"{what} line")
    if not len(first):
        raise ConfigError(f"the {what} file has no lines", where=path.name, fix=f"add one JSON object per line: {example}")
