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
    return name.lower().replace("_", "-").replace(".", "-")


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
