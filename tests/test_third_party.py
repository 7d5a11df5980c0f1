"""The third-party plugin path, for real: a fresh virtualenv, the project installed from its
source (not editable), and plugin packages installed beside it the way a user would.

One virtualenv serves the whole module. The two broken packages are installed only for the
test that needs them and uninstalled afterwards, so the other tests see a healthy environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PLUGIN_PACKAGE = ROOT / "examples" / "plugin_package"
# Copies leave out local state, so building never writes into the checkout (build/, *.egg-info).
IGNORE = shutil.ignore_patterns(".git", ".venv", ".nox", ".oloproof", ".pytest_cache", "__pycache__",
                                "*.pyc", "*.egg-info", "build", "dist")


def clean_env(**extra: str) -> dict:
    """The environment minus anything that could point the venv at this checkout or disable plugins."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OLOPROOF_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8", **extra}


class Venv:
    """A virtualenv in a temporary directory, driven only through its own executables."""

    def __init__(self, path: Path):
        self.path = path
        self.bin = path / ("Scripts" if os.name == "nt" else "bin")

    def pip(self, *args: str) -> None:
        proc = subprocess.run([str(self.bin / "python"), "-m", "pip", *args, "--quiet",
                               "--disable-pip-version-check"],
                              env=clean_env(), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"pip {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"

    def oloproof(self, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin / "oloproof"), *args], cwd=cwd, env=clean_env(**env),
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    @contextmanager
    def installed(self, source: Path, distribution: str) -> Iterator[None]:
        """``source`` installed for the duration of the block."""
        self.pip("install", str(source))
        try:
            yield
        finally:
            self.pip("uninstall", "--yes", distribution)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    base = tmp_path_factory.mktemp("third_party")
    root_copy = base / "oloproof-src"
    plugin_copy = base / "plugin_package"
    shutil.copytree(ROOT, root_copy, ignore=IGNORE)
    shutil.copytree(PLUGIN_PACKAGE, plugin_copy, ignore=IGNORE)
    subprocess.run([sys.executable, "-m", "venv", str(base / "venv")], check=True, timeout=300)
    env = Venv(base / "venv")
    env.pip("install", str(root_copy), str(plugin_copy))
    return env


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(PLUGIN_PACKAGE / "demo", target, ignore=IGNORE)
    return target


def rows(output: str) -> list[list[str]]:
    """The cells of every box-drawn table row (the │-separated lines are the output contract)."""
    return [[cell.strip() for cell in line.strip().strip("│").split("│")]
            for line in output.splitlines() if line.startswith("│")]


def row(output: str, first_cell: str) -> list[str]:
    found = [r for r in rows(output) if r[0] == first_cell]
    assert len(found) == 1, f"expected one row {first_cell!r} in:\n{output}"
    return found[0]


def assert_one_line_error(proc: subprocess.CompletedProcess) -> str:
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2, text
    assert "Traceback" not in text, text
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    assert proc.stdout.strip() == "", text
    return lines[0]


def write_package(where: Path, distribution: str, entry_point: str, module: str, source: str) -> Path:
    """A minimal installable plugin package: one module and one ``oloproof`` entry point."""
    where.mkdir(parents=True)
    (where / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=69"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{distribution}"
        version = "0.3.1"
        dependencies = ["oloproof"]

        [project.entry-points.oloproof]
        {entry_point} = "{module}"

        [tool.setuptools]
        py-modules = ["{module}"]
        """), encoding="utf-8")
    (where / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return where


# -- a working third-party evaluator -------------------------------------------------------------


def test_demo_suite_runs_with_the_installed_evaluator(venv: Venv, demo: Path) -> None:
    import json

    import jsonschema

    proc = venv.oloproof("run", "--json", "results.json", cwd=demo)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # both rules of the demo's policy pass
    assert "Traceback" not in proc.stderr
    # the JSON Schema ships in the installed (not editable) package, and the document follows it
    shipped = subprocess.run([str(venv.bin / "python"), "-c", "from importlib.resources import files; print(files("
                              "'oloproof_core.outputs').joinpath('results-v1.schema.json').read_text())"],
                             capture_output=True, text=True, check=True, env=clean_env()).stdout
    jsonschema.validate(json.loads((demo / "results.json").read_text(encoding="utf-8")), json.loads(shipped))
    assert row(proc.stdout, "answer_concise")[3] == "10 / 12 observed · 0 missing · 0 excluded"
    assert row(proc.stdout, "answer_correct")[3] == "11 / 12 observed · 0 missing · 0 excluded"
    assert row(proc.stdout, "mostly-concise")[1:3] == ["answer_concise", "PASS"]


def test_the_gate_decides_on_the_third_party_criterion(venv: Venv, demo: Path) -> None:
    config = demo / "oloproof.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("max_words: 12", "max_words: 3"),
                      encoding="utf-8")
    proc = venv.oloproof("run", cwd=demo)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a blocking rule FAILed
    assert row(proc.stdout, "answer_concise")[3] == "5 / 12 observed · 0 missing · 0 excluded"
    assert row(proc.stdout, "mostly-concise")[1:4] == ["answer_concise", "FAIL", "observed_failures_exceed_limit"]


@pytest.mark.parametrize(("replacement", "expected"), [
    ('max_words: "12"', "$.evaluators[1].max_words: expected an integer, got '12' (str)"),
    ("max_words: 0", "$.evaluators[1]: max_words must be at least 1, got 0"),  # the plugin's own validator
])
def test_bad_options_of_the_third_party_evaluator_are_located(venv: Venv, demo: Path, replacement: str,
                                                               expected: str) -> None:
    config = demo / "oloproof.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("max_words: 12", replacement), encoding="utf-8")
    line = assert_one_line_error(venv.oloproof("run", cwd=demo))
    assert line.startswith("error: oloproof.yaml:10:"), line
    assert expected in line


def test_plugins_lists_the_evaluator_with_its_distribution(venv: Venv, demo: Path) -> None:
    proc = venv.oloproof("plugins", cwd=demo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert row(proc.stdout, "word_limit") == ["word_limit", "evaluator word_limit", "oloproof-wordcount 0.1.0"]
    assert row(proc.stdout, "contains") == ["contains", "evaluator contains", "oloproof 0.1.0"]


# -- broken third-party plugins ------------------------------------------------------------------


BROKEN = '''
"""Built against a newer oloproof: the import fails the way a missing dependency would."""
from oloproof import NoSuchName  # noqa: F401 - the failure under test
'''


def test_a_plugin_that_fails_to_import_stops_the_run_with_one_line(venv: Venv, demo: Path, tmp_path: Path) -> None:
    package = write_package(tmp_path / "broken", "oloproof-broken", "broken_plugin", "oloproof_broken", BROKEN)
    with venv.installed(package, "oloproof-broken"):
        proc = venv.oloproof("run", cwd=demo)
        line = assert_one_line_error(proc)
        assert "'broken_plugin'" in line  # the entry point name
        assert "broken_plugin = oloproof_broken" in line  # the entry point itself
        assert "oloproof-broken 0.3.1" in line  # the distribution and its version
        assert "ImportError" in line and "NoSuchName" in line
        assert "OLOPROOF_DISABLE_PLUGINS=broken_plugin" in line

        assert_one_line_error(venv.oloproof("plugins", cwd=demo))
        # The fix the message offers works: a disabled plugin is never imported.
        assert venv.oloproof("run", cwd=demo, OLOPROOF_DISABLE_PLUGINS="broken_plugin").returncode == 0


CLASH = '''
"""Registers ``contains``, a name the builtin plugin of the same name already has."""
from attrs import frozen

from oloproof import Judgment, hookimpl


@frozen(kw_only=True)
class Options:
    criterion: str
    field: str | None = None
    expected_field: str = "answer"


@frozen
class Lenient:
    """Passes every case: a stand-in for a replacement of the builtin."""

    options: Options
    metric = "proportion"

    @property
    def criterion(self):
        return self.options.criterion

    def evaluate(self, case, execution):
        return Judgment.passed()


@hookimpl
def oloproof_register_evaluators(registry):
    registry.add("contains", Lenient, options=Options)
'''


def test_a_plugin_registering_a_builtin_name_stops_the_run(venv: Venv, demo: Path, tmp_path: Path) -> None:
    package = write_package(tmp_path / "clash", "oloproof-clash", "shadow", "oloproof_clash", CLASH)
    with venv.installed(package, "oloproof-clash"):
        proc = venv.oloproof("run", cwd=demo)
        line = assert_one_line_error(proc)
        assert "registered twice" in line
        assert "'contains'" in line and "'shadow'" in line  # both plugins
        assert "oloproof 0.1.0" in line and "oloproof-clash 0.3.1" in line  # both distributions

        # Replacing a builtin: disable it and the third party's registration of the name wins.
        config = demo / "oloproof.yaml"
        config.write_text(config.read_text(encoding="utf-8") + "disable_plugins: [contains]\n", encoding="utf-8")
        proc = venv.oloproof("run", cwd=demo)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert row(proc.stdout, "answer_correct")[3] == "12 / 12 observed · 0 missing · 0 excluded"
        listing = venv.oloproof("plugins", cwd=demo)
        assert row(listing.stdout, "shadow") == ["shadow", "evaluator contains", "oloproof-clash 0.3.1"]


def test_the_documented_example_is_the_packaged_one() -> None:
    """docs/plugins.md shows the word_limit package in full; keep it identical to the real files."""
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    for path in ("pyproject.toml", "oloproof_wordcount/__init__.py"):
        assert (PLUGIN_PACKAGE / path).read_text(encoding="utf-8") in docs, f"docs/plugins.md is out of date: {path}"


def documented_module(heading: str) -> str:
    """The Python block under ``heading`` of docs/plugins.md, as a third party copies it."""
    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_a_reporter_and_a_command_from_the_docs_work_as_installed_distributions(venv: Venv, demo: Path,
                                                                                 tmp_path: Path) -> None:
    """Two distributions written from docs/plugins.md alone: a reporter that ``--report`` calls
    with the run's view, and a command that ``oloproof --help`` lists and that reads the store."""
    reporter = write_package(tmp_path / "chat", "oloproof-chat-report", "chat_report", "oloproof_chat_report",
                             documented_module("## A reporter"))
    command = write_package(tmp_path / "csv", "oloproof-runs-csv", "runs_csv", "oloproof_runs_csv",
                            documented_module("## A command"))
    with venv.installed(reporter, "oloproof-chat-report"), venv.installed(command, "oloproof-runs-csv"):
        proc = venv.oloproof("run", "--report", "chat=gate.jsonl", "--json", "results.json", cwd=demo)
        assert proc.returncode in (0, 1, 3), proc.stdout + proc.stderr
        import json

        lines = [json.loads(line) for line in (demo / "gate.jsonl").read_text(encoding="utf-8").splitlines()]
        document = json.loads((demo / "results.json").read_text(encoding="utf-8"))
        assert lines[0] == {"gate": document["gate"], "run": document["run"]["id"]}
        assert [line["metric"] for line in lines[1:]] == [m["name"] for m in document["metrics"]] != []
        assert "reporter chat" in venv.oloproof("plugins", cwd=demo).stdout

        listing = venv.oloproof("--help", cwd=demo)
        assert "runs-csv" in listing.stdout and "Print the project's runs as CSV." in listing.stdout
        out = venv.oloproof("runs-csv", cwd=demo)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == ["run,cases", f"{document['run']['id']},{document['run']['cases']}"]

        unknown = assert_one_line_error(venv.oloproof("run", "--report", "nosuch=x", cwd=demo))
        assert "nosuch" in unknown
    assert "runs-csv" not in venv.oloproof("--help", cwd=demo).stdout  # uninstalled: gone
