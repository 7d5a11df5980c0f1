"""The suite's cases: a JSONL, CSV, JSON-array or YAML file, or a Hugging Face dataset (the ``hf``
extra), read through the bounded input of files.py into Case objects, every problem located
(``file:line`` for JSONL, CSV and YAML, the JSON path for a JSON array). docs/cases.md.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from oloproof_core.config.documents import Document, SeenIds, check_record, read_jsonl
from oloproof_core.model.errors import ConfigError
from oloproof_core.config.files import (
    MAX_CASE_FILE_BYTES, MAX_CASE_YAML_NODES, MAX_LINE_BYTES, parse_json_line, parse_json_text, parse_plain,
    read_lines, read_text, walk,
)
from oloproof_core.model.records import Case
from oloproof_core.config.turns import check_turn_ids, conversation_cases

FORMATS = {".jsonl": "jsonl", ".csv": "csv", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
KEYS = ("id", "input", "expected", "metadata")
RECORD_KEYS = (*KEYS, "turns")  # a conversation's record (turns.py): not a CSV column
SOURCE_KEYS = {"path": ("path", "format"), "hf": ("hf", "split", "revision")}
EXAMPLE = '{"id": "c001", "input": {...}}'
MISSING_FIX = "create it, or point `cases:` in oloproof.yaml at the right file"


def load_cases(setting: Any, project_dir: Path, doc: Document | None = None) -> Sequence[Case]:
    """The cases ``cases:`` names: a file (its format from the extension), ``{path: FILE, format:
    csv}`` to force the format, or ``{hf: NAME_OR_PATH, split: test}``."""
    at = ("cases",)
    where = doc.where(at) if doc is not None else "cases"
    if isinstance(setting, str):
        setting = {"path": setting}
    if not isinstance(setting, dict):
        raise ConfigError(f"expected a file name or a mapping, got {setting!r}", where=where,
                          fix="write cases: cases.jsonl, or cases: {path: cases.txt, format: csv}")
    kind = "hf" if "hf" in setting else "path"
    for key in setting:
        if key not in SOURCE_KEYS[kind]:
            close = difflib.get_close_matches(key, SOURCE_KEYS[kind], n=1)
            raise ConfigError(f"unknown key {key!r}", where=doc.where(at + (key,)) if doc else where,
                              fix=f"rename it to {close[0]!r}" if close else
                              f"`cases:` with {kind}: takes {', '.join(SOURCE_KEYS[kind])}")
    for key, value in setting.items():
        if not isinstance(value, str) or not value:
            raise ConfigError(f"expected a non-empty string, got {value!r}",
                              where=doc.where(at + (key,)) if doc else where, fix="quote the value")
    if kind == "hf":
        return _hf_cases(setting, project_dir, doc.where(at + ("hf",)) if doc else where)
    path = project_dir / setting["path"]
    fmt = setting.get("format") or FORMATS.get(path.suffix.lower())
    if fmt not in FORMATS.values():
        given = "format" in setting
        raise ConfigError(f"unknown case format {fmt!r}" if given else
                          f"cannot tell the format of {path.name} from its extension",
                          where=doc.where(at + (("format",) if given else ())) if doc else where,
                          fix="name the file .jsonl, .csv, .json or .yaml, or write "
                              "cases: {path: FILE, format: jsonl|csv|json|yaml}")
    return {"jsonl": _jsonl, "csv": _csv, "json": _json, "yaml": _yaml}[fmt](path)


_OPTIONAL = (dict, type(None))


def make_case(obj: dict, where: str, at: str) -> Case:
    """A checked record as a Case: ``input`` present, ``input``, ``expected`` and ``metadata`` objects
    (an absent one is an empty object of its own)."""
    input_, expected, metadata = obj.get("input"), obj.get("expected"), obj.get("metadata")
    if (type(input_) is not dict or type(expected) not in _OPTIONAL or type(metadata) not in _OPTIONAL
            or (expected is None and "expected" in obj) or (metadata is None and "metadata" in obj)):
        _check_fields(obj, where, at)  # the plain JSON shape is checked above; anything else here
    return Case(id=obj["id"], input=input_, expected={} if expected is None else expected,
                metadata={} if metadata is None else metadata, source=where if at == "$" else f"{where}: {at}")


def make_cases(obj: dict, where: str, at: str, turn_where: Callable[[int], str] | None = None) -> list[Case]:
    """A checked record as its cases: one, or a conversation's turn cases (turns.py)."""
    if "turns" in obj:
        return conversation_cases(obj, where, at, turn_where)
    return [make_case(obj, where, at)]


def _check_fields(obj: dict, where: str, at: str) -> None:
    if "input" not in obj:
        raise ConfigError(f"{at}.input: missing input", where=where,
                          fix='add "input": {...}, the object passed to the system')
    for key in ("input", "expected", "metadata"):
        if key in obj and not isinstance(obj[key], dict):
            raise ConfigError(f"{at}.{key}: expected a JSON object, got {obj[key]!r} ({type(obj[key]).__name__})",
                              where=where, fix=f'write "{key}": {{...}}')


HELD_BYTES = 2_000_000  # a larger JSONL file (some 10,000 cases) is read again by each pass, never held whole


def _jsonl(path: Path) -> Sequence[Case]:
    """The cases of a JSONL file: read and held when it is small; a larger one is a
    :class:`CaseStream`, checked by the suite in one streaming pass (:meth:`CaseStream.check`)."""
    try:
        large = path.stat().st_size > HELD_BYTES
    except OSError:
        large = False  # read_jsonl says what is wrong with it
    if large:
        return CaseStream(path)
    return check_turn_ids([case for where, obj in read_jsonl(path, what="case", keys=RECORD_KEYS, example=EXAMPLE,
                                                             missing_fix=MISSING_FIX)
                           for case in make_cases(obj, where, "$")])


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (-1, -1)
    return stat.st_size, stat.st_mtime_ns


class CaseStream(Sequence[Case]):
    """A large JSONL case file, read one case at a time by each pass over it: a run holds only the
    cases in flight. Its first pass, :meth:`check`, is the whole file's check (every problem
    located, duplicate ids), made when the suite loads, before anything runs. A file that changes
    after its check stops the pass with an error, so a run never mixes two versions of its cases.
    Indexing (a sequential run's seeded order, a diagnosis) reads the cases into memory once."""

    def __init__(self, path: Path):
        self.path = path
        self.count: int | None = None  # known once checked
        self.stamp = (-1, -1)
        self._held: tuple[Case, ...] | None = None

    def check(self, visit: Callable[[Case], Any] | None = None) -> None:
        """Read the whole file once, checking every line (as a small file is when read), and hand
        each case to ``visit`` (the evaluators' checks of what they can read)."""
        stamp, count = _stamp(self.path), 0
        for where, obj in read_jsonl(self.path, what="case", keys=RECORD_KEYS, example=EXAMPLE,
                                     missing_fix=MISSING_FIX):
            for case in make_cases(obj, where, "$"):  # every case, a bad field found before anything runs
                count += 1
                if visit is not None:
                    visit(case)
        self.stamp, self.count = stamp, count
        self.unchanged()

    def __len__(self) -> int:
        if self.count is None:
            raise RuntimeError("a CaseStream is read only after its check()")
        return self.count

    def unchanged(self) -> None:
        if _stamp(self.path) != self.stamp:
            self._changed()

    def _changed(self) -> NoReturn:
        raise ConfigError(f"{self.path.name} changed after its cases were checked", where=self.path.name,
                          fix="leave the case file alone while a command reads it, and run again")

    def __iter__(self) -> Iterator[Case]:
        """The cases again, from the bytes :meth:`check` read (its stamp says so, before the first
        case and after the last): each line parsed by the plain scanner and built as the check
        built it, without checking again what the check proved of those bytes (strict JSON, the
        fields, unique ids). A line that no longer reads as a case, or a case past the checked
        count, can only come from a changed file: that stops the pass."""
        if self._held is not None:
            yield from self._held
            return
        expected = len(self)  # checked first
        self.unchanged()
        name, count = self.path.name, 0
        for number, line in read_lines(self.path, what="case", missing_fix=MISSING_FIX):
            if not line.strip():  # a blank line, as read_jsonl skips it
                continue
            obj = parse_plain(line)
            if type(obj) is not dict or type(obj.get("id")) is not str:
                self._changed()
            try:
                cases = make_cases(obj, f"{name}:{number}", "$")
            except ConfigError:
                self._changed()
            count += len(cases)
            if count > expected:
                self._changed()
            yield from cases
        self.unchanged()

    def __getitem__(self, i: Any) -> Any:
        if self._held is None:
            self._held = tuple(self)
        return self._held[i]


def _records(items: Iterable[tuple[str, str, str, Any]], path_name: str) -> list[Case]:
    """(where, JSON path, how a duplicate names it, object) -> Cases; none at all is an error."""
    first = SeenIds(exact=math.inf)  # read whole: where each id was first is kept
    cases = []
    for where, at, here, obj, *turn_where in items:
        check_record(obj, where, at, first, here, what="case", keys=RECORD_KEYS, example=EXAMPLE)
        cases.extend(make_cases(obj, where, at, *turn_where))
    if not cases:
        raise ConfigError("the case file has no cases", where=path_name, fix=f"add at least one case: {EXAMPLE}")
    return check_turn_ids(cases)


def _read(path: Path) -> str:
    return read_text(path, limit=MAX_CASE_FILE_BYTES, fix=MISSING_FIX)


def _json(path: Path) -> list[Case]:
    data = parse_json_text(_read(path), path)
    if not isinstance(data, list):
        raise ConfigError(f"expected a JSON array of cases, got {type(data).__name__}", where=path.name,
                          fix=f"write [{EXAMPLE}, ...], or name a .jsonl file for one case a line")
    return _records(((path.name, f"$[{i}]", f"at $[{i}]", obj) for i, obj in enumerate(data)), path.name)


def _yaml(path: Path) -> list[Case]:
    doc = Document.load(path, limit=MAX_CASE_FILE_BYTES, nodes=MAX_CASE_YAML_NODES, fix=MISSING_FIX)
    if not isinstance(doc.data, list):
        raise ConfigError("expected a list of cases", where=doc.where(),
                          fix="write one `- id: c001` item per case, with input: {...} under it")

    def items():
        for i, obj in enumerate(doc.data):
            line = doc.tree.lc.item(i)[0] + 1
            where = f"{path.name}:{line}"
            _check_plain(obj, "$", where)
            yield where, "$", f"on line {line}", obj, _turn_lines(doc.tree[i], path.name)

    return _records(items(), path.name)


def _turn_lines(node: Any, name: str) -> Callable[[int], str] | None:
    """Where the k-th turn of a YAML conversation is: ``cases.yaml:LINE`` of its item."""
    turns = node.get("turns") if hasattr(node, "get") else None
    if not hasattr(turns, "lc"):
        return None
    return lambda k: f"{name}:{turns.lc.item(k)[0] + 1}" if k < len(turns) else name


def _check_plain(value: Any, at: str, where: str) -> None:
    """A YAML value a JSON case could hold: no date, no set, no .nan, no lone surrogate."""
    for spot, item in walk(value, at):
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"{spot}: {item} is not a JSON number", where=where, fix="write a finite number")
        if not (item is None or isinstance(item, (str, bool, int, float, dict, list))):
            raise ConfigError(f"{spot}: a YAML {type(item).__name__} is not a JSON value", where=where,
                              fix="quote it, to keep it as text")
    check_storable(value, at, where, fix="write it as JSON would: text, a finite number, a list or a mapping")


def check_storable(value: Any, at: str, where: str, fix: str) -> None:
    """A case source's value as strictly as a JSONL line (model/untrusted.py): a value no store
    keeps, or a lone surrogate, is the file's located error, exit 2, before anything runs."""
    from oloproof_core.model.untrusted import NotStorable, storable

    try:
        _, escaped = storable(value, at)
    except NotStorable as exc:
        raise ConfigError(str(exc), where=where, fix=fix) from None
    if escaped:
        raise ConfigError(f"{escaped[0]}: a lone surrogate escape is not text", where=where,
                          fix="write the character itself, or a complete \\uD8xx\\uDCxx pair")


# -- columns: CSV, and a dataset's flat rows ---------------------------------------------------

COLUMN_FIX = ("name the columns id, input.KEY, expected.KEY and metadata.KEY (a suffix :json reads the cell as "
              "JSON, :list splits it on |)")


def columns_to_record(row: dict[str, Any], where: str, text: bool) -> dict:
    """A flat row -> ``{id, input, expected, metadata}``: ``input.question`` -> input["question"].
    With ``text`` (CSV), an empty cell leaves the field out, a ``:json`` column is read as strict
    JSON and a ``:list`` column split on ``|``."""
    obj: dict = {}
    for column, value in row.items():
        name, _, kind = column.partition(":") if text else (column, "", "")
        if text and value == "":
            continue
        if kind == "json":
            try:
                value = parse_json_line(value, f"{where}: column {column}")
            except ConfigError as exc:
                raise ConfigError(exc.problem, where=exc.where,
                                  fix='write the cell as JSON: 3, true, ["a", "b"], "text in double quotes"') from None
        elif kind == "list":
            value = [item.strip() for item in value.split("|")]
        if name == "id":
            obj["id"] = value
            continue
        head, _, key = name.partition(".")
        obj.setdefault(head, {})[key] = value
    return obj


def check_columns(columns: list[str], where: str, text: bool) -> None:
    seen = set()
    for column in columns:
        name, _, kind = column.partition(":") if text else (column, "", "")
        head, dot, key = name.partition(".")
        ok = (name == "id" and not kind) or (head in KEYS[1:] and dot and key and kind in ("", "json", "list"))
        if not ok:
            close = difflib.get_close_matches(head, KEYS[1:], n=1)
            if head in KEYS:  # the field is right, its key is missing: expected. or input:bad
                hint = f"{head}.KEY"
            elif dot and close:  # a misspelt field (expectd.answer): the field spelt right, the key kept
                hint = f"{close[0]}.{key}"
            else:  # a bare name (question) or an unknown prefix: the name, under a field
                bare = key if dot else name
                hint = f"input.{bare} or metadata.{bare}"
            raise ConfigError(f"column {column!r} is not a case field", where=where,
                              fix=f"rename it (e.g. {hint}); {COLUMN_FIX}")
        if name in seen:
            raise ConfigError(f"column {name!r} appears twice", where=where, fix="keep one of them")
        seen.add(name)
    if "id" not in seen:
        raise ConfigError("no id column", where=where, fix=f"add a column id; {COLUMN_FIX}")
    if not any(c.startswith("input.") for c in seen):
        raise ConfigError("no input column", where=where,
                          fix="add one column per input field, e.g. input.question")


def _csv(path: Path) -> list[Case]:
    import csv
    import io

    text = _read(path)
    csv.field_size_limit(MAX_LINE_BYTES)  # a cell as long as a JSONL line may be, not csv's 128 KB
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise ConfigError(f"invalid CSV: {exc}", where=f"{path.name}:1", fix="check the quotes on that line") from None
    if not header:
        raise ConfigError("the case file has no header line", where=path.name,
                          fix=f"write a header line first: id,input.question,expected.answers:list; {COLUMN_FIX}")
    header = [h.strip() for h in header]
    check_columns(header, f"{path.name}:1", text=True)

    def items():
        line = reader.line_num
        while True:
            start = line + 1  # a quoted cell may span lines: the record starts after the last one
            try:
                cells = next(reader, None)
            except csv.Error as exc:
                raise ConfigError(f"invalid CSV: {exc}", where=f"{path.name}:{start}",
                                  fix="check the quotes on that line") from None
            line = reader.line_num
            if cells is None:
                return
            if not cells or cells == [""] * len(cells) and len(cells) <= 1:
                continue  # a blank line
            where = f"{path.name}:{start}"
            if len(cells) != len(header):
                raise ConfigError(f"{len(cells)} cells, the header has {len(header)} columns", where=where,
                                  fix="quote a cell that holds a comma, and give every line every column")
            yield where, "$", f"on line {start}", columns_to_record(dict(zip(header, cells)), where, text=True)

    return _records(items(), path.name)


# -- a Hugging Face dataset (the hf extra) -----------------------------------------------------


def _hf_cases(setting: dict, project_dir: Path, where: str) -> list[Case]:
    try:
        import datasets
    except ImportError:
        raise ConfigError("reading a Hugging Face dataset needs the datasets package", where=where,
                          fix="pip install 'oloproof[hf]'") from None
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    name, split = setting["hf"], setting.get("split")
    local = project_dir / name
    label = f"hf:{name}" + (f"[{split}]" if split else "")
    try:
        if (local / "dataset_info.json").is_file() or (local / "dataset_dict.json").is_file():
            data = datasets.load_from_disk(str(local))  # saved with save_to_disk
        else:  # a hub name, or a folder of data files
            data = datasets.load_dataset(str(local) if local.is_dir() else name, split=split,
                                         revision=setting.get("revision"))
    except (OSError, ValueError, KeyError, FileNotFoundError) as exc:
        problem = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot load the dataset {name!r}: {problem}", where=where,
                          fix="check the name or folder (a folder is relative to oloproof.yaml) and the split") from None
    if isinstance(data, datasets.DatasetDict):
        if split is None and len(data) == 1:
            split = next(iter(data))
        if split not in data:
            raise ConfigError(f"the dataset has no split {split!r}" if split else "the dataset has several splits",
                              where=where, fix=f"write split: one of {', '.join(sorted(data))}")
        data = data[split]
        label = f"hf:{name}[{split}]"
    columns = list(data.column_names)
    nested = set(columns) <= set(KEYS)
    if not nested:
        check_columns(columns, f"{label} (columns)", text=False)

    def items():
        for i, row in enumerate(data):
            where = f"{label} row {i}"
            record = row if nested else columns_to_record(row, where, text=False)
            # a dataset's column may hold NaN, bytes (an image), a timestamp: not what a case holds
            check_storable(record, "$", where, fix="convert the column to text, numbers or lists "
                                                   "(dataset.map), or drop it (dataset.remove_columns)")
            yield where, "$", f"at row {i}", record

    return _records(items(), label)
