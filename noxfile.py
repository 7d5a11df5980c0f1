"""Sessions: tests (every test; the README's `pytest` runs the fast ones), bench (speed figures), lint, docs."""

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.default_venv_backend = "venv"
PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Install the project with its test extras and run every test: the fast suite (`pytest`) and
    the slow, browser and service tests it leaves out (``-m ""`` lifts pyproject's selection)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Check the code with ruff (rules and line length in pyproject.toml)."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Report the speed targets as ratios to references measured in the same run (PASS or MISS,
    informative: the session never fails on a figure), then the http transports and the rest."""
    # the former http client, for the comparison; the OpenTelemetry SDK for the traced service
    session.install("-e", ".", "httpx-aiohttp>=0.1.8", "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http")
    session.run("python", "benchmarks/targets.py", *session.posargs)
    session.run("python", "benchmarks/http_bench.py", "--transports")
    session.run("python", "benchmarks/fingerprint_bench.py")
    session.run("python", "benchmarks/viewer_bench.py")
    session.run("python", "benchmarks/case_reading.py")
    session.run("python", "benchmarks/traces_bench.py")  # a traced run over an untraced one, 1,000 cases
    session.run("python", "benchmarks/startup_vs.py")  # --help and a 1-case run against the flat-core release


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site with warnings as errors."""
    session.install("-e", ".[docs]")
    session.run("mkdocs", "build", "--strict", "--site-dir", "site", *session.posargs)
