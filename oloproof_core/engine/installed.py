"""What is installed and what is the project's: the folders of installed packages, a file's
digest, a top-level package's distribution and version (used by the code fingerprints)."""

from __future__ import annotations

import hashlib
import os
import sys
import sysconfig
from functools import cache, lru_cache
from typing import Any

_DIGESTS: dict[tuple, str] = {}  # (file, size, mtime) -> sha256: each file read once per process

@lru_cache(maxsize=1)
def _installed_dirs() -> tuple[str, ...]:
    """Where installed code lives: never part of a project, even inside its directory."""
    import site

    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    for getter in (site.getsitepackages, lambda: [site.getusersitepackages()]):
        try:
            dirs.update(getter())
        except Exception:  # noqa: BLE001 - some embedded interpreters lack a site layout
            pass
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        dirs.add(prefix)
    dirs = {os.path.abspath(d) for d in dirs} | {os.path.realpath(d) for d in dirs}
    return tuple(sorted(d + os.sep for d in dirs))


def file_digest(filename: str) -> str:
    """sha256 of a file's bytes, read again only when its size or modification time changed (the
    execution identity and each stage's reach share the reading of a file)."""
    try:
        stat = os.stat(filename)
    except OSError:
        return "unreadable"
    key = (filename, stat.st_size, stat.st_mtime_ns)
    found = _DIGESTS.get(key)
    if found is None:
        try:
            with open(filename, "rb") as handle:
                found = hashlib.sha256(handle.read()).hexdigest()
        except OSError:
            return "unreadable"
        _DIGESTS[key] = found
    return found


@cache
def _package_version(top: str) -> Any:
    """The distribution (name and version) that provides top-level package ``top``, or None for
    the standard library."""
    from oloproof_core.hooks.discovery import distribution
    from oloproof_core.hooks.manager import name_and_version

    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return None
    for name in dict.fromkeys((top, top.replace("_", "-"))):
        # the usual case: the distribution is named like its package (numpy, httpx, attrs)
        dist = distribution(name)  # read directly, when sys.path is folders only
        if dist is False:
            import importlib_metadata as metadata

            try:
                dist = metadata.distribution(name)
            except (metadata.PackageNotFoundError, ValueError):
                dist = None
        if dist is not None:
            return [name, name_and_version(dist)[1]]
    found = _distribution_listing(top)
    if found is not None:
        return list(found)
    module = sys.modules.get(top)
    version = getattr(module, "__version__", None)
    filename = getattr(module, "__file__", None)
    # no distribution lists it: its own version and its file's bytes (never its size or time,
    # which a copy or a fresh checkout changes while the code stays the same)
    return [top, str(version) if version is not None else None, file_digest(filename) if filename else None]


def _distribution_listing(top: str) -> tuple[str, str] | None:
    """The installed distribution whose metadata lists package ``top`` (ruamel.yaml for ruamel):
    a text search of each ``*.dist-info``'s top_level.txt and RECORD, likeliest names first."""
    wanted = (f"\n{top}/", f"\n{top}.py,", f"\n{top}.")
    for entry in dict.fromkeys(sys.path):
        try:
            infos = [e for e in os.listdir(entry or ".") if e.endswith(".dist-info")]
        except OSError:
            continue
        infos.sort(key=lambda e: (top.split("_")[0].lower() not in e.lower(), e))
        for info in infos:
            folder = os.path.join(entry or ".", info)
            for part in ("top_level.txt", "RECORD"):
                try:
                    with open(os.path.join(folder, part), encoding="utf-8", errors="replace") as handle:
                        text = "\n" + handle.read()
                except OSError:
                    continue
                if (part == "top_level.txt" and f"\n{top}\n" in text + "\n") or (
                        part == "RECORD" and any(w in text for w in wanted)):
                    name, _, version = info[: -len(".dist-info")].partition("-")
                    return name, version
    return None
