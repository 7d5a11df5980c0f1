"""The shipped CI recipe works as written: examples/ci/github-actions.yml and gitlab-ci.yml, their
shell steps run in order on the support_rag example, with what needs the hosting service stood in
for (checkout, setup-python and the pull-request comment are left out; the cache and the artifact
upload copy folders). The install step is checked against the documented command, not run: the
package under test is already installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import olo

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "examples" / "ci"
INSTALL = 'pip install "$OLOPROOF_SOURCE"'


def load(name: str) -> dict:
    return YAML(typ="safe").load((RECIPES / name).read_text(encoding="utf-8"))


def shell(script: str, cwd: Path, env: dict) -> int:
    """A step's script as the hosted runners run it: bash, stop at the first failing command."""
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, timeout=300).returncode


def base_env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLOPROOF_", "GITHUB_", "GITLAB_"))}
    # `oloproof` and `python` resolve to the environment under test
    return {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", "CI": "true",
            "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}


class GitHubJob:
    """One job of the workflow, run step by step the way GitHub Actions runs it on a push."""

    def __init__(self, workflow: dict, job: str, cache: Path, artifacts: Path):
        self.workflow, self.job = workflow, workflow["jobs"][job]
        self.cache, self.artifacts = cache, artifacts

    def expand(self, text: str, run_id: int) -> str:
        return (text.replace("${{ github.ref_name }}", "main").replace("${{ github.run_id }}", str(run_id)))

    def run(self, workdir: Path, run_id: int) -> tuple[bool, list[tuple[str, int | None]]]:
        """(the job failed, [(step name, exit code or None when skipped)])."""
        env = {**base_env(workdir), **self.workflow.get("env", {}), **self.job.get("env", {}),
               "GITHUB_STEP_SUMMARY": str(workdir.parent / f"step-summary-{run_id}.md"), "GITHUB_ACTIONS": "true"}
        failed, log = False, []
        for step in self.job["steps"]:
            name = step.get("name") or step.get("uses")
            condition = step.get("if", "success()")
            if "github.event_name == 'pull_request'" in condition:  # a push: no pull request to comment on
                log.append((name, None))
                continue
            if failed and "always()" not in condition:
                log.append((name, None))
                continue
            code = self.step(step, workdir, {**env, **step.get("env", {})}, run_id)
            log.append((name, code))
            failed = failed or code != 0
        return failed, log

    def step(self, step: dict, workdir: Path, env: dict, run_id: int) -> int:
        uses, given = step.get("uses"), step.get("with", {})
        if uses is None:
            script = step["run"]
            assert "${{" not in script, "a run step reads the environment, not workflow expressions"
            if "pip install" in script:
                assert script.strip() == INSTALL, script
                return 0  # the package under test is installed already
            return shell(script, workdir, env)
        action = uses.split("@")[0]
        if action in ("actions/checkout", "actions/setup-python"):
            return 0
        if action == "actions/cache/restore":
            prefixes = [self.expand(given["key"], run_id)] + [
                self.expand(line, run_id) for line in given.get("restore-keys", "").splitlines() if line.strip()]
            for prefix in prefixes:
                found = sorted(p for p in self.cache.iterdir() if p.name.startswith(prefix))
                if found:
                    shutil.copytree(found[-1], workdir / given["path"])
                    break
            return 0
        if action == "actions/cache/save":
            entry = self.cache / self.expand(given["key"], run_id)
            assert not entry.exists(), "a cache entry is immutable: each run must save under a new key"
            shutil.copytree(workdir / given["path"], entry)
            return 0
        if action == "actions/upload-artifact":
            shutil.copytree(workdir / given["path"], self.artifacts / given["name"], dirs_exist_ok=True)
            return 0
        raise AssertionError(f"the recipe uses {uses}, which this test does not stand in for")


def checkout(tmp: Path, name: str) -> Path:
    """A fresh checkout of a project: the support_rag example, nothing of an earlier job."""
    source = tmp / "repository"
    if not source.exists():
        assert olo("init", "--example", "support_rag", str(source), cwd=tmp).code == 0
    target = tmp / name
    shutil.copytree(source, target)
    return target


def run_document(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_github_workflow_gates_exports_uploads_and_caches(tmp_path):
    import xmlschema

    workflow = load("github-actions.yml")
    job = GitHubJob(workflow, "gate", cache=tmp_path / "cache", artifacts=tmp_path / "artifacts")
    (tmp_path / "cache").mkdir()

    # 1. the gate blocks (exit 3): the job fails, and the results are still exported and uploaded
    first = checkout(tmp_path, "job-1")
    failed, log = job.run(first, run_id=1)
    codes = dict(log)
    assert failed and codes["Run the gate"] == 3, log
    for name in ("Export the run's bundle", "Save the store and caches", "Upload the results"):
        assert codes[name] == 0, log
    assert codes["Comment on the pull request"] is None
    uploaded = tmp_path / "artifacts" / "oloproof-results"
    for name in ("junit.xml", "run.json", "summary.md", "bundle/cases.jsonl", "bundle/run.json"):
        assert (uploaded / name).is_file(), name
    document = run_document(uploaded / "run.json")
    assert document["exit_code"] == 3 and document["gate"]["verdict"] == "BLOCK"
    assert document["caches"]["execution"] == {"hits": 0, "misses": 13}
    xmlschema.XMLSchema(ROOT / "tests" / "data" / "junit.xsd").validate(str(uploaded / "junit.xml"))
    assert "**Gate: BLOCK** (exit 3)" in (tmp_path / "step-summary-1.md").read_text(encoding="utf-8")
    assert json.loads((uploaded / "bundle" / "run.json").read_text())["run"]["id"] == document["run"]["id"]

    # 2. a later job on a fresh checkout restores the store: the same system is served from the cache;
    # with block_on [FAIL] nothing blocks, so the job passes
    second = checkout(tmp_path, "job-2")
    policy = second / "policy.yaml"
    policy.write_text(re.sub(r"block_on: \[.*\]", "block_on: [FAIL]", policy.read_text()), encoding="utf-8")
    shutil.rmtree(uploaded)
    failed, log = job.run(second, run_id=2)
    assert not failed and dict(log)["Run the gate"] == 0, log
    document = run_document(uploaded / "run.json")
    assert document["gate"]["verdict"] == "PASS" and document["exit_code"] == 0
    assert document["caches"]["execution"] == {"hits": 13, "misses": 0}
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["oloproof-main-1", "oloproof-main-2"]


@pytest.mark.slow
def test_gitlab_job_gates_then_always_exports_and_keeps_the_reports(tmp_path):
    import xmlschema

    job = load("gitlab-ci.yml")["oloproof"]
    work = checkout(tmp_path, "job")
    env = {**base_env(work), **job["variables"]}
    assert job["before_script"] == [INSTALL]  # the documented install command; the package is installed here
    code = 0
    for line in job["script"]:  # GitLab stops the script at the first failing line
        code = shell(line, work, env)
        if code:
            break
    assert code == 3  # the gate's exit code fails the job
    for line in job["after_script"]:  # runs whatever the script's exit code
        assert shell(line, work, env) == 0
    assert job["artifacts"]["when"] == "always" and job["cache"]["when"] == "always"
    for path in job["artifacts"]["paths"]:
        assert (work / path).is_dir()
    report = work / job["artifacts"]["reports"]["junit"]
    xmlschema.XMLSchema(ROOT / "tests" / "data" / "junit.xsd").validate(str(report))
    assert (work / "oloproof-results" / "bundle" / "cases.jsonl").is_file()
    assert job["cache"]["paths"] == [".oloproof/"] and (work / ".oloproof" / "store.db").is_file()


def test_the_ci_page_shows_the_shipped_workflow():
    page = (ROOT / "docs" / "gates-in-ci.md").read_text(encoding="utf-8")
    for name in ("github-actions.yml", "gitlab-ci.yml"):
        text = (RECIPES / name).read_text(encoding="utf-8")
        assert f"```yaml\n{text}```" in page, f"docs/gates-in-ci.md does not show examples/ci/{name} as shipped"


def test_every_page_installs_the_same_way():
    """One install section says how: `pip install oloproof` once released, a clone or a wheel until
    then, and no placeholder URL; the CI recipes read one source; no other page installs another way."""
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    install = index[index.index("## Install"):index.index("## Start")]
    assert "pip install oloproof\n" in install and "OWNER" not in install
    source = load("github-actions.yml")["env"]["OLOPROOF_SOURCE"]
    assert source == "oloproof", "the recipes install the release by default, with no placeholder to fill in"
    assert load("gitlab-ci.yml")["oloproof"]["variables"]["OLOPROOF_SOURCE"] == source
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if page.name in ("index.md", "changelog.md"):
            continue
        text = page.read_text(encoding="utf-8")
        for found in re.findall(r"pip install oloproof(?![-\w\[])[^\n`]*", text):
            assert page.name == "README.md" and "once a release is on PyPI" in text, f"{page.name}: {found}"
        for found in re.findall(r'pip install "git\+[^"]*"', text):
            assert f'"{source}"' in found, f"{page.name}: {found}"
