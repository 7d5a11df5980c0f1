"""Sequential runs (``oloproof run --until-decided``): cases in a seeded random order, batch by batch,
stopping when the gate is decided, with betting confidence sequences valid under optional stopping.

The simulations are seeded; Monte-Carlo tolerance 3·√(0.025·0.975/R) on a one-sided error rate.
"""

from __future__ import annotations

import json
import math
import sqlite3

import numpy as np
import pytest
from conftest import case

from oloproof_core.engine.sequential import Sequential
from oloproof_core.statistics.intervals import BETS, betting_interval, clopper_pearson

ALPHA = 0.05


def policy(text: str) -> str:
    return "policy:\n  version: 1\n" + text


def stored_header(project, run_id: str) -> dict:
    with sqlite3.connect(project.root / ".oloproof" / "store.db") as db:
        return json.loads(db.execute("SELECT header FROM runs WHERE id = ?", (run_id,)).fetchone()[0])


def suite_of(project, n: int, failing=lambda i: i % 10 == 0, extra: str = "") -> None:
    project.cases([case(i, ok=not failing(i)) for i in range(n)])
    with (project.root / "oloproof.yaml").open("a") as config:
        config.write(policy("  rules: [{id: floor, metric: answer_correct, min: 0.5}]\n") + extra)


@pytest.mark.slow
def test_a_sequential_run_stops_when_the_gate_is_decided_and_says_so(project):
    suite_of(project, 200)
    result = project.run("run", "--until-decided")
    assert result.code == 0, result
    lines = result.out.splitlines()
    run_id = lines[0].split()[1]
    assert lines[0].endswith("[DECIDED/SEQUENTIAL]")
    assert ("Sequential: stopped when the gate was decided, after 20 of 200 cases (seed 0, batches of 10, 2 looks); "
            "180 cases and up to 0 judge calls not made; intervals are betting confidence sequences, valid at every "
            "look") in lines
    # the cases run are the first 20 of the seeded order; the interval is the betting one, not Clopper-Pearson
    order = Sequential(seed=0, batch=10).order(200)
    ran = sorted(order[:20])
    failures = sum(1 for i in ran if i % 10 == 0)
    values = [0.0] * failures + [1.0] * (20 - failures)
    low, high = betting_interval(values)
    assert f"[{math.floor(1000 * low) / 10:.1f}%, {math.ceil(1000 * high) / 10:.1f}%]" in result.out
    header = stored_header(project, run_id)
    assert header["state"] == "DECIDED/SEQUENTIAL" and header["cases"] == 20
    assert header["sequential"] == {"seed": 0, "batch": 10, "looks": 2, "cases_run": 20, "cases_total": 200,
                                    "cases_not_run": 180, "judge_calls_not_made": 0, "interval": "betting",
                                    "method": header["sequential"]["method"], "stopped": "gate_decided",
                                    "series": header["sequential"]["series"], "earlier_seeds": []}
    exported = project.run("inspect", run_id, "--failures")
    assert f"{failures} of 20 cases failed" in exported.out
    again = project.run("run", "--until-decided", "--seed", "0")  # the same seed runs the same cases, from cache
    assert "Cache: execution 20 hit/0 miss; judgment 0 hit/20 miss" in again.out  # contains: made again, not cached


@pytest.mark.slow
def test_the_policy_can_ask_for_it_and_the_command_line_overrides(project):
    suite_of(project, 60, extra="  sequential: {until_decided: true, batch: 5, seed: 3}\n")
    result = project.run("run")
    assert "(seed 3, batches of 5," in result.out and "[DECIDED/SEQUENTIAL]" in result.out
    other = project.run("run", "--seed", "4", "--batch", "30")
    assert "(seed 4, batches of 30, 1 look)" in other.out


@pytest.mark.slow
def test_an_observed_count_rule_runs_every_case_unless_it_fails(project):
    project.cases([case(i) for i in range(30)])
    with (project.root / "oloproof.yaml").open("a") as config:
        config.write(policy("  rules:\n    - {id: floor, metric: answer_correct, min: 0.5}\n"
                            "    - {id: none-fail, metric: answer_correct, kind: observed_count, max_failures: 0}\n"))
    result = project.run("run", "--until-decided")
    assert result.code == 0, result
    assert "Sequential: ran every case, after 30 of 30 cases" in result.out
    project.cases([case(i, ok=i != 7) for i in range(30)])
    failed = project.run("run", "--until-decided", "--batch", "1")
    assert failed.code == 1 and "observed_failures_exceed_limit" in failed.out
    position = Sequential(seed=0, batch=1).order(30).index(7) + 1
    assert f"after {position} of 30 cases" in failed.out  # stopped at the first failure: the gate was decided


@pytest.mark.parametrize(("args", "extra", "message"), [
    (["--until-decided"], None, "--until-decided stops when the gate is decided, and this suite has no policy"),
    (["--seed", "3"], "", "--seed and --batch set the order and the looks of a sequential run"),
    (["--until-decided", "--batch", "0"], "", "the batch must be at least 1 case, got 0"),
    ([], "  sequential: {until_decided: true, batch: 0}\n",
     "oloproof.yaml:11:37: $.policy.sequential.batch: sequential.batch must be at least 1 case, got 0"),
])
def test_sequential_errors_exit_2(project, args, extra, message):
    project.cases([case(i) for i in range(3)])
    if extra is not None:
        with (project.root / "oloproof.yaml").open("a") as config:
            config.write(policy("  rules: [{id: floor, metric: answer_correct, min: 0.5}]\n") + extra)
    result = project.run("run", *args)
    assert result.code == 2, result
    assert message in result.err


def log_capital_up(successes: np.ndarray, trials: np.ndarray, m: float) -> np.ndarray:
    """log K⁺(m) of pass/fail data from its counts: each pass multiplies bet d's wealth by
    1 + u_d(1 - m)/m, each fail by 1 - u_d; averaged over the 19 bets."""
    up = np.log1p(BETS * (1 - m) / m)
    down = np.log1p(-BETS)
    logs = successes[..., None] * up + (trials - successes)[..., None] * down
    top = logs.max(axis=-1)
    return top + np.log(np.exp(logs - top[..., None]).mean(axis=-1))


def test_the_capital_criterion_is_the_betting_lower_bound():
    # A min rule PASSes when the lower bound is at least min, i.e. when K⁺(min) >= 2/α (K⁺ falls in m).
    for k, t, m in [(19, 20, 0.5), (15, 20, 0.5), (40, 50, 0.6), (95, 100, 0.9), (9, 10, 0.5)]:
        passes = bool(log_capital_up(np.array(k), np.array(t), m) >= math.log(2 / ALPHA))
        assert passes == (betting_interval([1.0] * k + [0.0] * (t - k))[0] >= m), (k, t, m)


@pytest.mark.slow
@pytest.mark.parametrize(("minimum", "total", "batch"), [(0.5, 500, 10), (0.8, 1000, 25), (0.9, 300, 3)])
def test_false_pass_under_repeated_looks_stays_below_nominal(minimum, total, batch):
    # The true pass rate sits exactly at the rule's min (the hardest case). A run looks after every batch and
    # stops at the first PASS: the betting confidence sequence keeps false PASS at or below α/2 = 2.5%;
    # Clopper-Pearson re-decided at every look does not.
    replicates = 4000
    rng = np.random.default_rng([int(100 * minimum), total, batch])
    passes = rng.random((replicates, total)) < minimum
    looks = np.arange(batch, total + 1, batch)
    successes = np.cumsum(passes, axis=1)[:, looks - 1]
    betting = (log_capital_up(successes, looks, minimum) >= math.log(2 / ALPHA)).any(axis=1).mean()
    tolerance = 3 * math.sqrt(0.025 * 0.975 / replicates)
    assert betting <= ALPHA / 2 + tolerance
    lower = {}
    for k, t in {(int(k), int(t)) for k, t in zip(successes.ravel(), np.broadcast_to(looks, successes.shape).ravel())}:
        lower[k, t] = clopper_pearson(k, t)[0]
    exact = np.vectorize(lambda k, t: lower[int(k), int(t)] >= minimum)(successes, np.broadcast_to(looks, successes.shape))
    assert exact.any(axis=1).mean() > ALPHA / 2 + tolerance  # optional stopping breaks a fixed-n interval


def log_capital_down(successes: np.ndarray, trials: np.ndarray, m: float) -> np.ndarray:
    """log K⁻(m) from counts: each pass multiplies bet d's wealth by 1 - u_d, each fail by 1 + u_d·m/(1 - m)."""
    logs = successes[..., None] * np.log1p(-BETS) + (trials - successes)[..., None] * np.log1p(BETS * m / (1 - m))
    top = logs.max(axis=-1)
    return top + np.log(np.exp(logs - top[..., None]).mean(axis=-1))


@pytest.mark.slow
@pytest.mark.parametrize(("p", "total", "batch"), [(0.5, 300, 1), (0.9, 500, 10), (0.97, 200, 5)])
def test_the_betting_interval_covers_at_every_look_at_once(p, total, batch):
    # Time-uniform coverage: the share of runs whose interval misses the truth at ANY look stays below α.
    replicates = 4000
    rng = np.random.default_rng([int(100 * p), total, batch, 1])
    successes = np.cumsum(rng.random((replicates, total)) < p, axis=1)
    looks = np.arange(batch, total + 1, batch)
    counts = successes[:, looks - 1]
    threshold = math.log(2 / ALPHA)
    missed = ((log_capital_up(counts, looks, p) >= threshold) | (log_capital_down(counts, looks, p) >= threshold))
    assert missed.any(axis=1).mean() <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / replicates)


def test_the_python_api_honours_the_policy_sequential_settings(project, monkeypatch):
    """oloproof.run stops when the gate is decided, as `oloproof run` does with the same policy."""
    import sys

    import oloproof

    suite_of(project, 200, extra="  sequential: {until_decided: true, batch: 10, seed: 0}\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "app", raising=False)
    outcome = oloproof.run(project.root / "oloproof.yaml")
    assert outcome.state == "DECIDED/SEQUENTIAL" and outcome.header["cases"] == 20
    record = outcome.header["sequential"]
    assert (record["seed"], record["looks"], record["cases_run"]) == (0, 2, 20)
    command = project.run("run")
    assert "after 20 of 200 cases (seed 0, batches of 10, 2 looks)" in command.out, command
    document = oloproof.evaluate(project.root / "oloproof.yaml", until_decided=True, seed=0, batch=20)
    assert document["gate"]["verdict"] == "PASS"


def test_a_reordered_rerun_warns_once_on_standard_error(project):
    suite_of(project, 60)
    first = project.run("run", "--until-decided", "--seed", "1")
    assert first.code == 0 and "Warning" not in first.err, first
    again = project.run("run", "--until-decided", "--seed", "1")  # the same order again: no new test
    assert "Warning" not in again.err, again
    other = project.run("run", "--until-decided", "--seed", "2")
    warnings = [line for line in other.err.splitlines() if line.startswith("Warning:")]
    assert warnings == ["Warning: this suite, policy and system version already ran sequentially with seed 1 "
                        "(2 runs); re-ordering the cases (seed 2) until a PASS voids the false-PASS guarantee: "
                        "decide on the first order, or change the system"], other
    header = stored_header(project, other.out.splitlines()[0].split()[1])
    assert header["sequential"]["seed"] == 2 and header["sequential"]["earlier_seeds"] == [1]
    assert header["sequential"]["looks"] >= 1
    # another policy is another series: no warning
    (project.root / "oloproof.yaml").write_text(
        (project.root / "oloproof.yaml").read_text().replace("min: 0.5", "min: 0.4"))
    assert "Warning" not in project.run("run", "--until-decided", "--seed", "3").err


@pytest.mark.slow
@pytest.mark.parametrize(("discordant", "total", "batch"), [(0.2, 200, 10), (0.5, 100, 5)])
def test_headroom_stopping_at_the_first_look_that_excludes_zero_keeps_its_level(discordant, total, batch):
    """`oloproof headroom --until-decided`: an intervention stops at the first look where the paired
    interval (paired_difference, the function headroom calls) excludes zero. With no true difference
    (as many fixed as broken in expectation), the share of runs that ever stop that way stays at or
    below α; the Wald interval re-decided at every look does not."""
    from oloproof_core.statistics.intervals import paired_difference

    replicates = 2000
    rng = np.random.default_rng([int(100 * discordant), total, batch, 35])
    draws = rng.random((replicates, total))
    fixed, broken = draws < discordant / 2, (draws >= discordant / 2) & (draws < discordant)
    looks = np.arange(batch, total + 1, batch)
    c, b = np.cumsum(fixed, axis=1)[:, looks - 1], np.cumsum(broken, axis=1)[:, looks - 1]
    excludes: dict = {}

    def decided(bi: int, ci: int, n: int) -> bool:  # pass/fail pairs: the interval depends on the counts only
        if (bi, ci, n) not in excludes:
            rest = [0.0] * (n - ci - bi)  # ci pairs fixed (+1), bi broken (-1), the rest unchanged
            _, low, high = paired_difference([1.0] * ci + [0.0] * bi + rest, [0.0] * ci + [1.0] * bi + rest, 0.95)
            excludes[bi, ci, n] = low > 0 or high < 0
        return excludes[bi, ci, n]

    stopped = np.array([[decided(int(bi), int(ci), int(n)) for bi, ci, n in zip(b[r], c[r], looks)]
                        for r in range(replicates)])
    assert stopped.any(axis=1).mean() <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / replicates)
    d = (c - b) / looks
    wald = np.abs(d) > 1.96 * np.sqrt(np.maximum((b + c) / looks - d ** 2, 1e-12) / looks)
    assert wald.any(axis=1).mean() > ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / replicates)  # the check can fail
