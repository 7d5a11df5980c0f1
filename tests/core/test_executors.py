"""Choosing an executor: the suite's `executor:`, `--executor`, and their errors (exit 2, before
anything runs). Runs on a Ray cluster are in tests/test_ray_executor.py."""

from __future__ import annotations

from conftest import case


def test_an_explicit_local_executor_is_the_default_one(project):
    project.cases([case(i) for i in range(6)])
    default = project.run("run")
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "executor: local\n")
    explicit = project.run("run", "--no-cache")
    assert default.code == explicit.code == 0
    assert "6 / 6 observed" in explicit.out


def test_an_unknown_executor_is_located_with_the_choices(project):
    project.cases([case(0)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text() + "executor: rayy\n")
    result = project.run("run")
    assert result.code == 2
    assert "oloproof.yaml:8" in result.err and "'rayy'" in result.err and "ray" in result.err, result
    assert project.runs() == []


def test_bad_executor_options_stop_before_anything_runs(project):
    project.cases([case(0)])
    base = (project.root / "oloproof.yaml").read_text()
    project.write("oloproof.yaml", base + "executor: {type: ray, replicas: 0}\n")
    result = project.run("run")
    assert result.code == 2 and "replicas must be at least 1" in result.err and "oloproof.yaml:8" in result.err, result
    project.write("oloproof.yaml", base + "executor: {type: ray, replica: 2}\n")
    result = project.run("run")
    assert result.code == 2 and "'replica'" in result.err and "replicas" in result.err, result
    assert project.runs() == []


def test_the_command_line_replaces_the_suites_executor(project):
    project.cases([case(i) for i in range(3)])
    project.write("oloproof.yaml", (project.root / "oloproof.yaml").read_text()
                  + "executor: {type: ray, address: 127.0.0.1:1}\n")  # nothing listens there
    result = project.run("run", "--executor", "local")
    assert result.code == 0 and "3 / 3 observed" in result.out, result
    wrong = project.run("run", "--executor", "threads")
    assert wrong.code == 2 and "--executor" in wrong.err and "local" in wrong.err, wrong
