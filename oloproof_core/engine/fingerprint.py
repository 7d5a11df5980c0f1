"""Code fingerprints: what a Python system's cached results depend on.

Two fingerprints, both plain data that go into cache identities:

- :func:`project_fingerprint`, for the execution identity: the source of every module of the
  user's project that is loaded (or that a loaded project module imports lazily), the versions of
  the installed packages the project's modules use, and the Python version.
- :func:`reach_fingerprint`, for a staged system's stage caches: the code a stage can reach from
  its methods, followed through ``self.<name>`` (resolved on the class, so an overridden method
  counts), global names, closures, defaults and lazy imports, transitively. Project functions are
  fingerprinted by their code objects (line numbers and comments aside), project classes by their
  qualified names and members, project modules referenced as a whole by their whole source, data
  by its canonical JSON, and anything installed by its distribution's version.

:func:`plugin_code` uses the second for a plugin's own code (an evaluator's class, an LLM
provider's), so the judgments it makes miss the cache when a plugin developed in place is edited.

A *project module* is one whose file lies under one of the project's roots (the config file's
directory) and not in an installed location (site-packages, the standard library, a virtual
environment). What no fingerprint can see (data files, remote services, randomness) is listed in
docs/caching.md.
"""

from __future__ import annotations

import builtins
import hashlib
import os
import sys
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from oloproof_core.engine.installed import _installed_dirs, _package_version, file_digest
from oloproof_core.engine.recording import source_fingerprint
from oloproof_core.model.identity import canonical, digest

_BUILTINS = frozenset(dir(builtins))




class _Project:
    """The roots of one project and what is known of its files in this process."""

    def __init__(self, roots: Iterable[Path | str]):
        installed = _installed_dirs()
        # a root that is itself an installed location (a project inside a venv's prefix) keeps
        # only the installed directories strictly below it excluded
        # a root is a directory, or one module file (a plugin that is a single module)
        self.roots = tuple(os.path.realpath(r) + ("" if os.path.isfile(r) else os.sep) for r in roots)
        self.excluded = tuple(d for d in installed if not any(r.startswith(d) for r in self.roots))
        self._is_project: dict[str, bool] = {}
        self._tops: dict[str, frozenset[str]] = {}  # import-path entry -> the module names it holds

    def owns(self, filename: str | None) -> bool:
        if not filename or filename.startswith("<"):
            return False
        known = self._is_project.get(filename)
        if known is None and filename.startswith(self.excluded):  # most modules: no realpath needed
            known = self._is_project[filename] = False
        if known is None:
            real = os.path.realpath(filename)
            known = (any(real.startswith(r) for r in self.roots)
                     and not any(real.startswith(d) for d in self.excluded))
            self._is_project[filename] = known
        return known

    def relative(self, filename: str) -> str:
        real = os.path.realpath(filename)
        for root in self.roots:
            if real == root:
                return os.path.basename(real)
            if real.startswith(root):
                return real[len(root):].replace(os.sep, "/")
        return real

    def module_file(self, name: str) -> str | None:
        """The project file of module ``name`` (loaded or not), found without importing it."""
        module = sys.modules.get(name)
        if module is not None:
            filename = getattr(module, "__file__", None)
            return filename if self.owns(filename) else None
        parts = name.split(".")
        for entry in sys.path:
            entry = entry or os.getcwd()
            if parts[0] not in self._top_names(entry):  # one listdir per import-path entry, then sets
                continue
            base = os.path.join(entry, *parts)
            for candidate in (base + ".py", os.path.join(base, "__init__.py")):
                if self.owns(candidate) and os.path.isfile(candidate):
                    return candidate
        return None

    def _top_names(self, entry: str) -> frozenset[str]:
        """The top-level module names a project directory on the import path holds."""
        found = self._tops.get(entry)
        if found is None:
            found = frozenset()
            if self.owns(os.path.join(entry, "_")):
                try:
                    found = frozenset(n[:-3] if n.endswith(".py") else n for n in os.listdir(entry))
                except OSError:
                    pass
            self._tops[entry] = found
        return found


def _module_name_of(obj: Any) -> str | None:
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    return getattr(obj, "__module__", None) if isinstance(getattr(obj, "__module__", None), str) else None


def _code_digest(code: types.CodeType, hasher: Any) -> None:
    """Feed what a code object does into ``hasher``: not its file name or line numbers."""
    hasher.update(code.co_code)
    hasher.update(repr((code.co_name, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                        code.co_flags, code.co_names, code.co_varnames, code.co_freevars,
                        code.co_cellvars)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_digest(const, hasher)
        else:
            hasher.update(_const_repr(const).encode("utf-8", "surrogatepass"))


def _const_repr(const: Any) -> str:
    """A constant's repr, with sets in a stable order (their iteration order varies by process)."""
    if isinstance(const, (frozenset, set)):
        return "{" + ",".join(sorted(_const_repr(c) for c in const)) + "}"
    if isinstance(const, tuple):
        return "(" + ",".join(_const_repr(c) for c in const) + ")"
    return f"{type(const).__name__}:{const!r}"


def _names(code: types.CodeType) -> set[str]:
    """Every global, attribute and imported name a code object (and its nested code) mentions."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


class _Walker:
    """Collects what a set of objects can reach, as sorted records."""

    def __init__(self, project: _Project, cls: type | None = None):
        self.project, self.cls = project, cls
        self.records: dict[str, Any] = {}
        self.seen: set[int] = set()
        self.todo: list[tuple[Any, str | None]] = []

    def add(self, obj: Any, holder: str | None = None) -> None:
        self.todo.append((obj, holder))

    def run(self) -> dict:
        while self.todo:
            obj, holder = self.todo.pop()
            if id(obj) in self.seen:
                continue
            self.seen.add(id(obj))
            self.visit(obj, holder)
        return dict(sorted(self.records.items()))

    def installed(self, obj: Any) -> None:
        name = _module_name_of(obj)
        module_file = getattr(sys.modules.get(name or ""), "__file__", None)
        if self.project.owns(module_file):
            # generated code of a project module (a dataclass's __init__, a namedtuple's methods)
            # has no file of its own: the bytes of the module that generated it stand in
            self.records[f"module:{self.project.relative(module_file)}"] = file_digest(module_file)
            return
        if name:
            top = name.split(".")[0]
            version = _package_version(top)
            if version is not None:
                self.records[f"package:{top}"] = version

    def visit(self, obj: Any, holder: str | None) -> None:
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            for part in (obj.fget, obj.fset, obj.fdel):
                if part is not None:
                    self.add(part, holder)
            return
        if isinstance(obj, types.MethodType):
            obj = obj.__func__
        if isinstance(obj, types.ModuleType):
            self.visit_module(obj)
        elif isinstance(obj, types.FunctionType):
            self.visit_function(obj)
        elif isinstance(obj, type):
            self.visit_class(obj)
        elif callable(obj) and hasattr(obj, "__wrapped__"):
            self.add(obj.__wrapped__, holder)
        else:
            self.visit_value(obj, holder)

    def visit_module(self, module: types.ModuleType) -> None:
        filename = getattr(module, "__file__", None)
        if not self.project.owns(filename):
            self.installed(module)
            return
        self.records[f"module:{self.project.relative(filename)}"] = file_digest(filename)
        for name, value in list(vars(module).items()):
            if not name.startswith("__"):
                self.add(value, filename)

    def visit_function(self, fn: types.FunctionType) -> None:
        code = fn.__code__
        if not self.project.owns(code.co_filename):
            self.installed(fn)
            return
        hasher = hashlib.sha256()
        _code_digest(code, hasher)
        self.records[f"function:{fn.__module__}:{fn.__qualname__}"] = hasher.hexdigest()
        for value in (fn.__defaults__ or ()) + tuple((fn.__kwdefaults__ or {}).values()):
            self.add(value, code.co_filename)
        for cell in fn.__closure__ or ():
            try:
                self.add(cell.cell_contents, code.co_filename)
            except ValueError:  # an empty cell
                pass
        namespace = fn.__globals__
        for name in _names(code):
            self.resolve(name, namespace, code.co_filename)

    def resolve(self, name: str, namespace: dict, filename: str) -> None:
        if self.cls is not None:
            for klass in self.cls.__mro__:
                if name in vars(klass):
                    self.add(vars(klass)[name], filename)
                    break
        if name in namespace:
            self.add(namespace[name], filename)
            return
        if name in _BUILTINS:
            return
        # a module imported inside a function (`import helpers` or `from pkg.sub import x`)
        module = sys.modules.get(name)
        if module is not None:
            self.add(module, filename)
            return
        path = self.project.module_file(name)
        if path is not None:
            self.records[f"module:{self.project.relative(path)}"] = file_digest(path)

    def visit_class(self, klass: type) -> None:
        module = sys.modules.get(klass.__module__)
        filename = getattr(module, "__file__", None)
        if not self.project.owns(filename):
            self.installed(klass)
            return
        self.records[f"class:{klass.__module__}:{klass.__qualname__}"] = [
            f"{b.__module__}:{b.__qualname__}" for b in klass.__mro__]
        for base in klass.__mro__[1:]:
            self.add(base, filename)
        for name, value in list(vars(klass).items()):
            if name not in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"):
                self.add(value, filename)

    def visit_value(self, value: Any, holder: str | None) -> None:
        klass = type(value)
        if klass.__module__ not in ("builtins",):
            self.add(klass, holder)
        try:
            text = canonical(value)
        except (TypeError, ValueError, RecursionError):
            # not plain data (an index object, a client): its holder module's whole source stands in
            if holder is not None and self.project.owns(holder):
                self.records[f"module:{self.project.relative(holder)}"] = file_digest(holder)
            return
        if holder is not None and self.project.owns(holder):
            key = f"data:{self.project.relative(holder)}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
            self.records[key] = len(text)


def project_fingerprint(roots: Iterable[Path | str]) -> dict:
    """What every loaded project module is, for a Python system's execution identity.

    :param roots: the project's directories (the config file's directory).
    :return: ``{"python": "3.11", "modules": {relative path: sha256}, "packages": {top-level
        package: version}}`` -- the packages being the installed ones the project modules use.
    """
    project = _Project(roots)
    walker = _Walker(project)
    modules: dict[str, str] = {}
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None) if module is not None else None
        if not project.owns(filename):
            continue
        modules[project.relative(filename)] = file_digest(filename)
        for value in list(vars(module).values()):
            if isinstance(value, types.ModuleType) or callable(value):
                if not project.owns(getattr(sys.modules.get(_module_name_of(value) or ""), "__file__", None)):
                    walker.installed(value)
        for code in _module_code_objects(module):
            for imported in _names(code):
                path = project.module_file(imported) if imported not in sys.modules else None
                if path is not None:
                    modules[project.relative(path)] = file_digest(path)
    packages = {k.removeprefix("package:"): v for k, v in sorted(walker.records.items())}
    return {"python": "{}.{}".format(*sys.version_info[:2]), "modules": dict(sorted(modules.items())),
            "packages": packages}


def _module_code_objects(module: types.ModuleType) -> Iterable[types.CodeType]:
    """The code of the functions and methods a module defines (where lazy imports hide)."""
    name = module.__name__
    for value in list(vars(module).values()):
        if isinstance(value, types.FunctionType) and value.__module__ == name:
            yield value.__code__
        elif isinstance(value, type) and value.__module__ == name:
            for member in list(vars(value).values()):
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, types.FunctionType):
                    yield member.__code__


def reach_fingerprint(objects: Iterable[Any], roots: Iterable[Path | str], cls: type | None = None) -> dict:
    """What ``objects`` can reach, for a stage cache's key.

    :param objects: the entry points (a stage's method, ``__init__``).
    :param cls: the class the methods run on: ``self.<name>`` resolves through its MRO, so two
        subclasses sharing an inherited method that calls an overridden one differ.
    :return: sorted records ``{"function:mod:qualname": digest, "module:path": sha256,
        "class:...": [mro], "data:...": size, "package:top": version}``.
    """
    walker = _Walker(_Project(roots), cls)
    if cls is not None:
        walker.records[f"self:{cls.__module__}:{cls.__qualname__}"] = [
            f"{b.__module__}:{b.__qualname__}" for b in cls.__mro__]
    for obj in objects:
        walker.add(obj)
    records = walker.run()
    records["python"] = "{}.{}".format(*sys.version_info[:2])
    return records


def plugin_code(obj: Any) -> list[str]:
    """A plugin's code, for the identity of what it produces (an evaluator's class, a provider's
    factory): the source of the module that defines ``obj``, and what ``obj`` can reach from the
    folder its package lives in (a helper module of a plugin being developed, not only a released
    version). An installed package is covered by its distribution's version, which the identity
    records beside this."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    filename = getattr(module, "__file__", None)
    if filename is None:
        return [source_fingerprint(obj)]
    top = sys.modules.get(obj.__module__.split(".")[0])
    package_file = getattr(top, "__file__", None) or filename
    # the same code has the same identity wherever it lies: a wheel in site-packages, an editable
    # checkout, a copy in another folder. So the reach is taken within the plugin's own package
    # folder (or its one module file), and anything beyond it counts by its distribution's version
    # or, without one, by its file's bytes
    root = os.path.dirname(package_file) if package_file.endswith("__init__.py") else package_file
    cls = obj if isinstance(obj, type) else None
    return [source_fingerprint(obj), digest(reach_fingerprint([obj], [root], cls=cls))]


def short(fingerprint: Any) -> str:
    """The 12 hex characters shown after a declared version (``slice-b-example+3f2a9c0d1e4b``)."""
    return hashlib.sha256(canonical(fingerprint).encode()).hexdigest()[:12]
