"""The README's commands, exactly as written, in fresh virtualenvs.

A newcomer runs the first command (a wheel-style install, ``pip install .``, and the example's
run), then the second (``pip install -e '.[test]'``, an editable install of the same code), then
the next steps on the first run. Nothing may change an identity in between: ``diagnose`` and
``compare`` accept the first run. The release's wheel, built the documented way, runs the first
command too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_third_party import IGNORE, ROOT, clean_env

pytestmark = pytest.mark.slow

README = (ROOT / "README.md").read_text(encoding="utf-8")


def sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", README, flags=re.S)


def next_step(command: str) -> str:
    """The README's `oloproof <command> ...` of its next steps, placeholders and all."""
    found = re.findall(rf"`(oloproof {command} [^`]*)`", README)
    assert found, f"the README names no `oloproof {command}` step"
    return found[0]


def shell(command: str, cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def run_id(output: str) -> str:
    found = re.search(r"^Run (run_[0-9A-Z]+) ", output, flags=re.M)
    assert found, output
    return found.group(1)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    target = tmp_path / "oloproof"
    shutil.copytree(ROOT, target, ignore=IGNORE)
    return target


def test_the_readme_s_commands_in_order_then_its_next_steps_on_the_first_run(clone: Path) -> None:
    first, second = sh_blocks()[:2]
    assert "pip install ." in first and first.endswith("oloproof run"), first
    made = shell(first, clone)
    assert made.returncode == 3, made.stdout + made.stderr  # the example's gate blocks, by design
    first_run = run_id(made.stdout)

    install = second.split(" && pytest")[0]
    assert install == "pip install -e '.[test]'", second
    editable = shell(f". .venv/bin/activate && {install}", clone)
    assert editable.returncode == 0, editable.stdout + editable.stderr

    demo = clone / "demo"
    activate = f". {clone / '.venv' / 'bin' / 'activate'}"
    diagnose = next_step("diagnose").replace("RUN_ID", first_run)
    diagnosed = shell(f"{activate} && {diagnose}", demo)
    assert diagnosed.returncode == 0, diagnosed.stdout + diagnosed.stderr
    assert "defined differently" not in diagnosed.stdout + diagnosed.stderr
    assert "Child runs: gold context run_" in diagnosed.stdout, diagnosed.stdout

    again = shell(f"{activate} && oloproof run", demo)
    assert again.returncode == 3, again.stdout + again.stderr
    # the editable install's system is the wheel's: every execution is reused (its evaluators are the
    # wheel's too: compare, below, finds no criterion defined differently); the five evaluators are
    # in-process, so their judgments are made again
    assert "Cache: execution 13 hit/0 miss; judgment 0 hit/65 miss" in again.stdout, again.stdout
    compare = next_step("compare").replace("CANDIDATE", run_id(again.stdout)).replace("BASELINE", first_run)
    compared = shell(f"{activate} && {compare}", demo)
    assert compared.returncode in (0, 1, 3), compared.stdout + compared.stderr
    assert "Decisions" in compared.stdout and "defined differently" not in compared.stderr, compared
    assert "`oloproof compare latest previous`" in README
    named = shell(f"{activate} && oloproof compare latest previous", demo)
    assert named.returncode == compared.returncode and named.stdout.split("Decisions")[1] == (
        compared.stdout.split("Decisions")[1]), named


def test_the_built_wheel_runs_the_readme_s_first_command(clone: Path) -> None:
    import oloproof

    built = shell(f"{sys.executable} -m pip wheel --quiet --no-deps -w dist .", clone)
    assert built.returncode == 0, built.stderr
    wheel = clone / "dist" / f"oloproof-{oloproof.__version__}-py3-none-any.whl"
    assert wheel.is_file(), sorted(p.name for p in (clone / "dist").iterdir())
    # the first command with the wheel in place of the checkout, run from a folder with no source
    first = sh_blocks()[0].replace("pip install .", f"pip install {wheel}")
    elsewhere = clone.parent / "elsewhere"
    elsewhere.mkdir()
    made = shell(first, elsewhere)
    assert made.returncode == 3, made.stdout + made.stderr
    assert "Gate: BLOCK (exit 3)" in made.stdout
    assert "answer_correct  │ 69.2%" in made.stdout, made.stdout
