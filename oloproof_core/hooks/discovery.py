"""A cheap look for other distributions' plugins, before the entry points are read properly.

Reading the ``oloproof`` entry points through importlib-metadata costs a command line about as
much as the rest of ``oloproof --help``. When no installed distribution but Oloproof itself
declares an ``oloproof`` entry point, there is nothing to read: :func:`others_may_exist` answers
False only then, after looking at every folder of ``sys.path``; anything it cannot tell (a zip
on the path, a file it cannot read) counts as "may exist", and the entry points are read.
"""

from __future__ import annotations

import os
import re
import sys

_SECTION = re.compile(r"^\[\s*oloproof\s*\]", re.MULTILINE)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def others_may_exist(own: str = "oloproof") -> bool:
    """Whether a distribution other than ``own`` may declare an ``oloproof`` entry point."""
    for entry in sys.path:
        folder = entry or os.curdir
        if not os.path.isdir(folder):
            if os.path.exists(folder):
                return True  # a zip file or an egg: read it properly
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            return True
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            if _normalized(name.rsplit(".", 1)[0].split("-")[0]) == own:
                continue
            path = os.path.join(folder, name, "entry_points.txt")
            try:
                with open(path, "rb") as handle:
                    data = handle.read()
            except (FileNotFoundError, NotADirectoryError):
                continue  # no entry points, or a single-file PKG-INFO egg-info
            except OSError:
                return True
            if b"oloproof" in data:  # the section's name, or only a mention: read it properly
                try:
                    if _SECTION.search(data.decode("utf-8")):
                        return True
                except UnicodeDecodeError:
                    return True
    return False


# -- the entry points and distributions themselves, when sys.path is folders only ------------------
#
# importlib-metadata answers for any sys.path (zips, eggs, custom finders); importing it and
# building its distributions costs a command line about a tenth of a 1-case run
# (benchmarks/startup_vs.py). When every entry of sys.path is a folder, the same answers come from
# reading the ``*.dist-info`` and ``*.egg-info`` folders directly: the first distribution of a
# normalised name on sys.path wins, as importlib-metadata's ``entry_points`` has it. Anything else
# on the path (a zip, a file it cannot read) returns None, and the callers ask importlib-metadata.

_ENTRY = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")


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

        match = _ENTRY.match(self.value)
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
        text = dist.read_text("entry_points.txt")
        if not text or group not in text:
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
