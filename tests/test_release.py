"""The release workflow and the one place the version is kept.

The workflow itself runs on the repository's host; this checks what it promises: the sdist and the
wheel are built and checked with twine, the wheel is installed in a clean virtualenv and runs the
example, and only a version tag naming ``oloproof.__version__`` publishes, through trusted
publishing (no token anywhere). tests/test_readme.py builds the wheel here and runs the README's
first command from it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def workflow() -> dict:
    return YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))


def commands(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_the_version_is_kept_in_one_place():
    import oloproof

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "oloproof.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", oloproof.__version__)
    from importlib.metadata import version

    assert version("oloproof") == oloproof.__version__


def test_the_release_builds_checks_smoke_tests_and_publishes_only_a_tag_by_trusted_publishing():
    flow = workflow()
    on = flow.get("on", flow.get(True))  # YAML 1.1 readers take `on` for true
    assert on["push"]["tags"] == ["v*"]
    jobs = flow["jobs"]
    build = commands(jobs["build"])
    assert "python -m build" in build and "twine check --strict dist/*" in build
    assert 'test "$GITHUB_REF_NAME" = "v$version"' in build and "__version__" in build
    smoke = commands(jobs["smoke"])
    assert "python -m venv clean" in smoke and 'pip install "$wheel"' in smoke
    assert "oloproof init --example support_rag demo" in smoke and 'test "$status" -eq 3' in smoke
    assert jobs["smoke"]["needs"] == "build"
    publish = jobs["publish"]
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')" and publish["needs"] == ["build", "smoke"]
    assert publish["permissions"] == {"id-token": "write"}
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert "pypa/gh-action-pypi-publish@release/v1" in uses
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "secrets." not in text and "password" not in text  # trusted publishing: no token
    assert flow["permissions"] == {"contents": "read"}


def test_the_install_page_has_no_placeholder():
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    install = index[index.index("## Install"):index.index("## Start")]
    assert "pip install oloproof" in install and "OWNER" not in install and "pip install ." in install
    assert "pip wheel --no-deps -w dist ." in install
