"""Files in and out, within bounds: input read with limits on size, nesting and expansion before
it is built, strict JSON, and bundle files written whole, inside the project, with the umask.

Every problem is a located ConfigError (``file:line: problem; fix: ...``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from oloproof_core.model.errors import ConfigError, OloproofError
from oloproof_core.model.untrusted import STRICT_HOOKS, Refused

# -- bounded input: every file is checked for size, nesting and expansion before it is built -----

MAX_YAML_BYTES = 1_000_000  # a config or policy file; real ones are a few kilobytes
MAX_YAML_NODES = 100_000  # values a YAML file may expand to, its aliases expanded
MAX_DEPTH = 64  # nesting of YAML and of each JSON line
MAX_LINE_BYTES = 16_000_000  # one line of a case or label file
MAX_CASE_FILE_BYTES = 200_000_000  # a case file read whole (CSV, a JSON array, YAML)
MAX_CASE_YAML_NODES = 5_000_000  # values a YAML case file may expand to
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, as a Windows editor writes it: accepted, skipped


def read_text(path: Path, *, limit: int, fix: str) -> str:
    """A UTF-8 text file of at most ``limit`` bytes; every way it can fail is a located ConfigError."""
    data = read_bytes(path, limit=limit, fix=fix).removeprefix(BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"not UTF-8 text: byte 0x{data[exc.start]:02x}", where=f"{path.name}:{line}:{column}",
                          fix="save the file as UTF-8") from None


def shown(path: Path) -> str:
    """``path`` as the user would write it: relative to the current directory when inside it."""
    try:
        return os.path.relpath(path) if Path(os.path.abspath(path)).is_relative_to(Path.cwd()) else str(path)
    except (OSError, ValueError):
        return str(path)


def open_file(path: Path, fix: str):
    """``path`` opened for reading in binary; a missing file, a directory or a symlink loop is a
    ConfigError naming it."""
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"no such file {path.name}", where=shown(path), fix=fix) from None
    except IsADirectoryError:
        raise ConfigError("a directory, not a file", where=shown(path), fix="name the file inside it") from None
    except OSError as exc:
        problem = exc.strerror[:1].lower() + exc.strerror[1:] if exc.strerror else str(exc)
        raise ConfigError(f"cannot read it: {problem}", where=shown(path),
                          fix="fix the path (a symbolic link loop, a permission)") from None


def read_bytes(path: Path, *, limit: int, fix: str, what: str = "") -> bytes:
    with open_file(path, fix) as handle:
        try:
            data = handle.read(limit + 1)
        except IsADirectoryError:
            raise ConfigError("a directory, not a file", where=shown(path), fix="name the file inside it") from None
    if len(data) > limit:
        raise ConfigError(f"the file is larger than {limit // 1_000_000} MB", where=path.name,
                          fix=f"split the {what} file, or write it as JSONL (one case a line, no size limit)" if what
                          else "keep configs and policies small; put cases in the JSONL case file")
    return data


def check_yaml_shape(text: str, path: Path) -> None:
    """Nesting, bounded before the parser sees it (its cost grows with the square of the depth):
    flow brackets at most MAX_DEPTH deep, block indentation at most 4 * MAX_DEPTH columns."""
    depth = 0
    for match in re.finditer(r"[\[\]{}]", text):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_DEPTH:
            line = text.count("\n", 0, match.start()) + 1
            raise ConfigError(f"nested more than {MAX_DEPTH} levels deep", where=f"{path.name}:{line}",
                              fix="flatten the file")
    for line, match in enumerate(re.finditer(r"^[ \t?:-]*", text, re.MULTILINE), 1):
        if match.end() - match.start() > 4 * MAX_DEPTH:
            raise ConfigError(f"nested more than {MAX_DEPTH} levels deep", where=f"{path.name}:{line}",
                              fix="flatten the file")


def check_aliases(events: Any, path: Path, limit: int = MAX_YAML_NODES) -> None:
    """Count the values the document expands to, each alias counted as what it names, from the
    parser's events (nothing is expanded); more than ``limit`` is an error."""
    from ruamel.yaml.events import AliasEvent, CollectionEndEvent, CollectionStartEvent, ScalarEvent

    sizes: dict[str, int] = {}
    stack: list[list] = [[None, 0]]  # [anchor, values so far] of each open collection
    for event in events:
        if isinstance(event, CollectionStartEvent):
            stack.append([event.anchor, 1])
        elif isinstance(event, CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
            stack[-1][1] += size
        elif isinstance(event, (ScalarEvent, AliasEvent)):
            size = 1 if isinstance(event, ScalarEvent) else sizes.get(event.anchor, 1)
            if isinstance(event, ScalarEvent) and event.anchor is not None:
                sizes[event.anchor] = 1
            stack[-1][1] += size
        else:
            continue
        if sum(frame[1] for frame in stack) > limit:
            mark = event.start_mark
            raise ConfigError(f"its aliases expand to more than {limit:,} values",
                              where=f"{path.name}:{mark.line + 1}:{mark.column + 1}",
                              fix="write the repeated blocks out, or use fewer nested aliases")


_LONG_NUMBER = f"invalid JSON: an integer of more than {sys.get_int_max_str_digits()} digits, more than Python reads"
_LONG_NUMBER_FIX = "write the number as a string, or with fewer digits"


_DECODER = json.JSONDecoder(**STRICT_HOOKS)  # NaN, 1e400 and a duplicate key refused
# NaN and 1e400 refused; a duplicate key is found by counting the keys (_unique), with no hook per object
_SCAN = json.JSONDecoder(parse_constant=STRICT_HOOKS["parse_constant"], parse_float=STRICT_HOOKS["parse_float"]).scan_once
_SPACE = (" ", "\t", "\n", "\r")  # JSON's whitespace, which the decoder skips around a value


def _keys(value: Any) -> int:
    """How many keys the objects in ``value`` hold, nested ones included."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            count += len(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return count


def parse_plain(line: str) -> Any:
    """``line`` parsed by the JSON scanner alone, when it is one value and JSON's whitespace; None
    otherwise (and for ``null``). Nothing else is checked: for a line :func:`parse_json_line`
    accepts, it returns the value that returns."""
    start = len(line) - len(line.lstrip(" \t\n\r")) if line[:1] in _SPACE else 0
    try:
        obj, end = _SCAN(line, start)
    except (ValueError, StopIteration, RecursionError):  # StopIteration: no value there
        return None
    if end != len(line) and line[end:].strip(" \t\n\r"):
        return None
    return obj


def _unique(line: str) -> Any:
    """The value of ``line`` when :func:`parse_plain` reads it and it provably has no duplicate key,
    else None. Every key is followed by a colon, so the keys parsed <= the keys written <= the
    colons in the line; when the keys parsed (counted one level deep first, a record's shape) equal
    the colons, no key was written twice."""
    obj = parse_plain(line)
    if obj is None:
        return None
    colons = line.count(":")
    if type(obj) is dict:
        shallow = len(obj)
        for value in obj.values():
            if type(value) is dict:
                shallow += len(value)
        if shallow == colons:
            return obj
    return obj if _keys(obj) == colons else None


def parse_json_line(line: str, where: str) -> Any:
    """One line of JSON, strictly: no NaN or Infinity, no duplicate key, at most MAX_DEPTH deep,
    and text only (a lone surrogate escape such as ``\\ud800`` is not a character). A line the
    plain scanner reads with no duplicate key possible is not parsed again; any other goes through
    the strict decoder, which says what is wrong."""
    if line.count("[") + line.count("{") > MAX_DEPTH and _depth(line) > MAX_DEPTH:
        raise ConfigError(f"nested more than {MAX_DEPTH} levels deep", where=where, fix="flatten the object")
    obj = _unique(line)
    if obj is None:
        obj = _strict_line(line, where)
    if "\\u" in line and re.search(r"\\u[dD][89a-fA-F]", line):
        check_text(obj, "$", where)
    return obj


def _strict_line(line: str, where: str) -> Any:
    try:
        obj = _DECODER.decode(line)
    except Refused as exc:
        raise ConfigError(f"invalid JSON: {exc}", where=where,
                          fix="write strict JSON: numbers are finite, each key appears once") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg} (column {exc.colno})", where=where,
                          fix="write one JSON object per line") from None
    except ValueError:  # what else the decoder raises: an integer too long to convert
        raise ConfigError(_LONG_NUMBER, where=where, fix=_LONG_NUMBER_FIX) from None
    return obj


def parse_json_text(text: str, path: Path) -> Any:
    """A whole JSON file, as strictly as :func:`parse_json_line`; a syntax error is located at
    ``file:line:col``."""
    depth = 0
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):  # strings skipped
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise ConfigError(f"nested more than {MAX_DEPTH} levels deep", where=f"{path.name}:{line}",
                                  fix="flatten the file")
        elif char in "]}":
            depth -= 1
    try:
        obj = _DECODER.decode(text)
    except Refused as exc:
        raise ConfigError(f"invalid JSON: {exc}", where=path.name,
                          fix="write strict JSON: numbers are finite, each key appears once") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg}", where=f"{path.name}:{exc.lineno}:{exc.colno}",
                          fix="check the brackets, commas and quotes there") from None
    except ValueError:
        raise ConfigError(_LONG_NUMBER, where=path.name, fix=_LONG_NUMBER_FIX) from None
    if re.search(r"\\u[dD][89a-fA-F]", text):
        check_text(obj, "$", path.name)
    return obj


def _depth(line: str) -> int:
    """The deepest bracket nesting of a JSON text, strings skipped."""
    deepest = depth = 0
    in_string = escaped = False
    for char in line:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def walk(value: Any, path: str = "$") -> Iterator[tuple[str, Any]]:
    """``value`` and every value nested in it, each with its JSON path (``$.a[0]``)."""
    yield path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from walk(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]")


def check_text(value: Any, path: str, where: str) -> None:
    """Every string and key of ``value`` is text: a lone surrogate is a ConfigError at its path."""
    for at, item in walk(value, path):
        texts = [(f"{at}.{k}", k) for k in item if isinstance(k, str)] if isinstance(item, dict) else (
            [(at, item)] if isinstance(item, str) else [])
        for spot, text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigError(f"{spot}: a lone surrogate escape is not text", where=where,
                                  fix="write the character itself, or a complete \\uD8xx\\uDCxx pair") from None


def read_lines(path: Path, *, what: str, missing_fix: str) -> Iterator[tuple[int, str]]:
    """The numbered lines of a UTF-8 text file, each at most MAX_LINE_BYTES."""
    try:
        handle = open_file(path, missing_fix)
    except ConfigError as exc:
        if exc.problem.startswith("no such file"):
            raise ConfigError(f"no such {what} file {path.name}", where=shown(path), fix=missing_fix) from None
        raise
    with handle:
        number = 0
        while True:
            try:
                raw = handle.readline(MAX_LINE_BYTES + 1)
            except IsADirectoryError:
                raise ConfigError("a directory, not a file", where=shown(path), fix="name the file inside it") from None
            if not raw:
                return
            number += 1
            if number == 1:
                raw = raw.removeprefix(BOM)
            if len(raw) > MAX_LINE_BYTES:
                raise ConfigError(f"the line is longer than {MAX_LINE_BYTES // 1_000_000} MB",
                                  where=f"{path.name}:{number}", fix=f"keep each {what} under that size")
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}",
                                  where=f"{path.name}:{number}", fix="save the file as UTF-8") from None




def bundle_folder(project_dir: Path, run_id: str) -> Path:
    """``.oloproof/bundles/RUN_ID``, made if need be, refusing any symbolic link that leads out of
    the project's ``.oloproof/``."""
    if not re.fullmatch(r"run_[A-Za-z0-9_-]{1,100}", run_id):  # a shared store may hold any text as an id
        raise OloproofError(f"{ascii(run_id)[:80]} is not a run id oloproof makes; no bundle is written for it",
                            fix="run `oloproof store check`; `oloproof store repair` quarantines it")
    root = project_dir.resolve() / ".oloproof"
    folder = root
    for part in ("bundles", run_id):
        folder = folder / part
        if folder.is_symlink():
            raise OloproofError(f"{folder.relative_to(project_dir.resolve())} is a symbolic link; a bundle is "
                                "written only inside .oloproof/", fix="remove the link and export again")
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o777, exist_ok=True)  # 0777 less the umask, as any folder the user makes
    if not os.path.realpath(folder).startswith(os.path.realpath(root) + os.sep):
        raise OloproofError(f"{folder} leads out of .oloproof/", fix="remove the symbolic link and export again")
    return folder


def regular_target(path: str | Path, option: str = "") -> None:
    """A file a report may be written to: absent, or a regular file (a symbolic link is judged by
    what it leads to). A device, a FIFO, a socket or a directory is refused (exit 2), and so is
    ``-``: reports are files; print a run's document with `oloproof inspect RUN --format json`."""
    import stat

    where = option or str(path)
    if str(path) == "-":
        raise OloproofError("a report is written to a file, not to standard output (-)", where=where,
                            fix="name a file, or print the document with `oloproof inspect RUN_ID --format json`")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OloproofError(f"{path}: cannot use it: {exc.strerror or exc}", where=option or None,
                            fix="name a regular file") from None
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "not a regular file")
        raise OloproofError(f"{path} is {kind}; a report is written only to a regular file",
                            where=option or None, fix="name a new file or a regular one")


def write_file(folder: Path, name: str, chunks: Iterable[str]) -> None:
    """Write ``folder/name`` whole or not at all (a temporary file renamed over it, which replaces a
    symbolic link rather than following it), with mode 0666 less the umask like any file the user
    makes."""
    import tempfile

    regular_target(folder / name)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}-")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for chunk in chunks:
                handle.write(chunk)
        os.replace(tmp, folder / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class Spool:
    """Lines written once, then read back once in order: held in memory up to ``size`` characters,
    beyond that in an anonymous temporary file. A listing as long as a run (its failures, say) is
    written while the run streams past and printed after its head line, which needs the counts."""

    def __init__(self, size: int = 1 << 20):
        import tempfile

        self._file = tempfile.SpooledTemporaryFile(max_size=size, mode="w+", encoding="utf-8",
                                                   errors="surrogatepass", newline="\n")

    def write(self, lines: Iterable[str]) -> None:
        """Append ``lines`` (each without a newline of its own)."""
        for line in lines:
            self._file.write(line + "\n")

    def __iter__(self) -> Iterator[str]:
        with self._file:
            self._file.seek(0)
            for line in self._file:
                yield line[:-1]
