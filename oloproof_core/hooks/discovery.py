"""The installed distributions and their entry points, read from sys.path's metadata folders.

Importing importlib-metadata and building its distributions costs a command line about a tenth of
a 1-case run, and about as much as the rest of ``oloproof --help``. When every entry of sys.path
is a folder, the same answers come from reading the ``*.dist-info`` and ``*.egg-info`` folders
directly (the first distribution of a normalised name on sys.path wins, as importlib-metadata's
``entry_points`` has it); anything else on the path (a zip, a file it cannot read) returns None,
and the callers ask importlib-metadata. :func:`others_may_exist` is what ``oloproof --help``
asks: whether any distribution but Oloproof declares an ``oloproof`` entry point.
"""

from __future__ import annotations

import os
import re
import sys

def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def others_may_exist(own: str = "oloproof") -> bool:
    """Whether a distribution other than ``own`` may declare an ``oloproof`` entry point."""
    points = entry_points("oloproof")
    return points is None or any(point.dist.name != own for point in points)


_ENTRY = r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$"  # as importlib-metadata reads it


class Distribution:
    """One installed distribution: its normalised name and metadata folder."""

    __slots__ = ("name", "folder")

    def __init__(self, name: str, folder: str) -> None:
        self.name, self.folder = name, folder

    def read_text(self, filename: str) -> str | None:
        try:
            with open(os.path.join(self.folder, filename), encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None


class EntryPoint:
    """``name = module:attr`` of ``group`` in ``dist``'s entry_points.txt; ``load()`` imports it."""

    __slots__ = ("name", "value", "group", "dist")

    def __init__(self, name: str, value: str, group: str, dist: Distribution) -> None:
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self):
        import importlib

        match = re.match(_ENTRY, self.value)
        if match is None:
            raise ValueError(f"entry point {self.name} = {self.value!r} is not module:attribute")
        found = importlib.import_module(match.group("module"))
        for part in (match.group("attr") or "").split(".") if match.group("attr") else ():
            found = getattr(found, part)
        return found


_INSTALLED: dict[tuple, list | None] = {}  # sys.path -> what is installed on it (read once a process)


def installed() -> list[Distribution] | None:
    """Every distribution on sys.path, first of each name, or None when sys.path holds anything
    but readable folders."""
    key = tuple(sys.path)
    if key not in _INSTALLED:
        _INSTALLED.clear()
        _INSTALLED[key] = _scan()
    return _INSTALLED[key]


def _scan() -> list[Distribution] | None:
    found: dict[str, Distribution] = {}
    for entry in sys.path:
        folder = entry or os.curdir
        if not os.path.isdir(folder):
            if os.path.exists(folder):
                return None
            continue
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return None
        for name in names:
            if name.endswith((".dist-info", ".egg-info")) and os.path.isdir(os.path.join(folder, name)):
                normalized = _normalized(name.rsplit(".", 1)[0].split("-")[0])
                found.setdefault(normalized, Distribution(normalized, os.path.join(folder, name)))
    return list(found.values())


def entry_points(group: str) -> list[EntryPoint] | None:
    """The entry points of ``group`` of every installed distribution, or None (ask importlib-metadata)."""
    distributions = installed()
    if distributions is None:
        return None
    points = []
    for dist in distributions:
        try:
            with open(os.path.join(dist.folder, "entry_points.txt"), encoding="utf-8") as handle:
                text = handle.read()
        except (FileNotFoundError, NotADirectoryError):
            continue  # no entry points
        except (OSError, UnicodeDecodeError):
            return None  # a file it cannot read: importlib-metadata reads it properly
        if group not in text:
            continue
        section = None
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1].strip()
            elif section == group and "=" in line:
                name, _, value = line.partition("=")
                points.append(EntryPoint(name.strip(), value.strip(), group, dist))
    return points


def distribution(name: str) -> Distribution | None | bool:
    """The installed distribution named ``name`` (normalised), None if there is none, or False
    when this look cannot tell (ask importlib-metadata)."""
    distributions = installed()
    if distributions is None:
        return False
    wanted = _normalized(name)
    return next((d for d in distributions if d.name == wanted), None)
