"""The ``openai`` and ``anthropic`` providers against a real local stand-in speaking both wire
formats: requests, usage and cost, keys, retries honouring Retry-After, faults and limits."""

from __future__ import annotations

import threading
import time

import pytest
from provider_standin import Fault, StandIn, reply_text, verdict

import oloproof_anthropic
import oloproof_openai
from oloproof import ConfigError, EvaluationError, retry_after
from oloproof_core.hooks.manager import Plugins, make_plugin_manager
from oloproof_core.engine.providers import open_provider

KEY = "sk-standin-5f3c9e"
MODULES = {"openai": oloproof_openai, "anthropic": oloproof_anthropic}


@pytest.fixture
def standin():
    with StandIn(key=KEY) as server:
        yield server


@pytest.fixture(autouse=True)
def key_env(monkeypatch):
    monkeypatch.setenv("OLO_TEST_KEY", KEY)


def make(wire: str, standin: StandIn, **options):
    module = MODULES[wire]
    base_url = standin.openai_url if wire == "openai" else standin.anthropic_url
    defaults = {"model": "judge-1", "base_url": base_url, "api_key_env": "OLO_TEST_KEY", "backoff": 0.0}
    provider = oloproof_openai.OpenAIProvider if wire == "openai" else oloproof_anthropic.AnthropicProvider
    return provider(module.Options(**{**defaults, **options}))


def registry():
    pm = make_plugin_manager(entry_points=False, plugins=[("openai", oloproof_openai),
                                                          ("anthropic", oloproof_anthropic)])
    return Plugins(pm).providers


both = pytest.mark.parametrize("wire", ["openai", "anthropic"])


def test_hook_oloproof_register_providers():
    assert registry().names() == ["anthropic", "openai"]
    entry = registry().get("openai")
    assert entry.plugin == "openai" and entry.options is oloproof_openai.Options


def test_builtin_providers_are_listed_by_the_plugins_command(tmp_path):
    from conftest import olo

    result = olo("plugins", cwd=tmp_path)
    assert "provider openai" in result.out and "provider anthropic" in result.out


@both
def test_a_request_speaks_the_wire_format_with_temperature_zero(wire, standin):
    provider = make(wire, standin)
    reply = provider.complete("Is it grounded?", system="You are a judge.")
    assert reply.text == verdict("pass")
    request = standin.requests[-1]
    assert request["wire"] == wire
    body, headers = request["body"], {k.lower(): v for k, v in request["headers"].items()}
    assert body["model"] == "judge-1" and body["temperature"] == 0.0
    assert request["prompt"] == "Is it grounded?" and request["system"] == "You are a judge."
    if wire == "openai":
        assert headers["authorization"] == f"Bearer {KEY}"
        assert body["messages"][0] == {"role": "system", "content": "You are a judge."}
    else:
        assert headers["x-api-key"] == KEY and headers["anthropic-version"] == "2023-06-01"
        assert body["max_tokens"] == 1024 and body["messages"] == [{"role": "user", "content": "Is it grounded?"}]


@both
def test_usage_and_cost_from_the_prices_per_million_tokens(wire, standin):
    provider = make(wire, standin, price_per_million_input_tokens=0.15, price_per_million_output_tokens=0.60)
    reply = provider.complete("x")
    # 100 input tokens at $0.15/M plus 20 output tokens at $0.60/M = $0.000015 + $0.000012
    assert reply.usage == {"input_tokens": 100, "output_tokens": 20, "cost": pytest.approx(2.7e-5)}
    assert make(wire, standin).complete("x").usage == {"input_tokens": 100, "output_tokens": 20}


@both
def test_a_missing_key_is_a_config_error_naming_the_variable(wire, standin, monkeypatch):
    monkeypatch.delenv("OLO_TEST_KEY")
    with pytest.raises(ConfigError) as caught:
        make(wire, standin)
    assert "OLO_TEST_KEY" in caught.value.problem and "export OLO_TEST_KEY" in caught.value.fix
    assert standin.requests == []


def test_openai_without_a_key_for_a_local_server():
    open_server = StandIn()
    with open_server:
        provider = make("openai", open_server, api_key_env=None)
        provider.complete("x")
    assert "Authorization" not in open_server.requests[0]["headers"]


@both
def test_the_key_is_never_in_the_repr_or_an_error(wire, standin, monkeypatch):
    provider = make(wire, standin)
    assert KEY not in repr(provider) and KEY not in repr(provider.options)
    monkeypatch.setenv("OLO_TEST_KEY", "sk-wrong-key")
    with pytest.raises(EvaluationError) as caught:
        make(wire, standin).complete("x")
    assert str(caught.value) == "provider_error: 401"  # not retried: the same key fails the same way
    assert len(standin.requests) == 1


@both
def test_429_is_retried_after_the_retry_after_seconds(wire, standin):
    standin.faults.append(Fault(429, retry_after="1"))
    start = time.monotonic()
    reply = make(wire, standin, backoff=0.0).complete("x")
    assert time.monotonic() - start >= 0.95
    assert reply.text == verdict("pass") and len(standin.requests) == 2


def test_retry_after_is_capped_by_max_backoff(standin):
    standin.faults.append(Fault(429, retry_after="30"))
    start = time.monotonic()
    make("openai", standin, max_backoff=0.2).complete("x")
    assert time.monotonic() - start < 5


@both
def test_a_500_is_retried_and_a_persistent_one_makes_the_judgment_missing(wire, standin):
    standin.faults.append(Fault(500))
    assert make(wire, standin).complete("x").text == verdict("pass")
    assert len(standin.requests) == 2
    standin.faults.extend([Fault(503)] * 3)
    with pytest.raises(EvaluationError, match=r"^provider_error: 503$"):
        make(wire, standin, retries=2).complete("x")
    assert len(standin.requests) == 5


@both
def test_malformed_json_is_not_sent_again(wire, standin):
    standin.faults.append(Fault("malformed"))
    with pytest.raises(EvaluationError, match="^provider_error: invalid_json$"):
        make(wire, standin).complete("x")
    assert len(standin.requests) == 1


@both
def test_a_slow_reply_times_out_and_is_retried(wire, standin):
    standin.faults.append(Fault("slow", 1.5))
    start = time.monotonic()
    assert make(wire, standin, timeout=0.3, retries=1).complete("x").text == verdict("pass")
    assert time.monotonic() - start < 1.4 and len(standin.requests) == 2
    standin.faults.append(Fault("slow", 1.5))
    with pytest.raises(EvaluationError, match="^provider_error: timeout$"):
        make(wire, standin, timeout=0.3, retries=0).complete("x")


def test_an_unreachable_server_is_a_connection_error():
    with StandIn() as gone:
        url = gone.openai_url
    provider = oloproof_openai.OpenAIProvider(oloproof_openai.Options(model="m", base_url=url, api_key_env=None,
                                                                      retries=1, backoff=0.0))
    with pytest.raises(EvaluationError, match="^provider_error: connection_error: ConnectError$"):
        provider.complete("x")


@both
def test_a_scripted_reply_and_a_reply_of_the_wrong_shape(wire, standin):
    standin.faults.extend([reply_text("not a verdict"), Fault("empty")])
    provider = make(wire, standin)
    assert provider.complete("x").text == "not a verdict"
    with pytest.raises(EvaluationError, match="^provider_error: unexpected_response$"):
        provider.complete("x")


def test_the_concurrency_limit_holds_requests_in_flight(standin):
    standin.faults.extend([Fault("slow", 0.3)] * 4)
    provider = make("openai", standin, concurrency=1)
    threads = [threading.Thread(target=provider.complete, args=("x",)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert standin.max_in_flight == 1 and len(standin.requests) == 4


@pytest.mark.parametrize(("options", "problem"), [
    ({"timeout": 0.0}, "timeout must be positive"),
    ({"retries": -1}, "retries must be at least 0"),
    ({"temperature": -0.5}, "temperature must be at least 0"),
    ({"price_per_million_input_tokens": 1.0}, "give both price_per_million_input_tokens"),
    ({"base_url": "api.openai.com"}, "is not an http(s) URL"),
])
def test_options_that_cannot_work_are_config_errors(standin, options, problem):
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        make("openai", standin, **options)


@pytest.mark.parametrize(("headers", "seconds"), [
    ({"retry-after": "3"}, 3.0), ({"retry-after-ms": "250"}, 0.25), ({"retry-after": "soon"}, None), ({}, None),
    ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
])
def test_retry_after_reads_seconds_milliseconds_and_dates(headers, seconds):
    assert retry_after(headers) == seconds


def test_open_provider_structures_the_judges_provider_options(standin):
    provider = open_provider("openai", "judge-2", {"base_url": standin.openai_url, "api_key_env": "OLO_TEST_KEY"},
                             registry=registry())
    assert provider.model == "judge-2" and provider.options.temperature == 0.0


def test_open_provider_errors_name_the_judge_and_the_fix(standin, monkeypatch):
    with pytest.raises(ConfigError) as caught:
        open_provider("opnai", "m", {}, what="evaluator 'groundedness_judge'", registry=registry())
    assert caught.value.problem == "evaluator 'groundedness_judge' names unknown provider 'opnai'"
    assert caught.value.fix == "did you mean 'openai'?"
    with pytest.raises(ConfigError) as caught:
        open_provider("openai", "m", {"treshold": 1}, what="evaluator 'x'", registry=registry())
    assert caught.value.where == "$.provider_options.treshold"
    assert caught.value.problem == "evaluator 'x', provider 'openai': unknown key 'treshold'"
    assert caught.value.fix.startswith("remove it; provider 'openai' from <local> accepts: model, base_url, api_key_env")
    with pytest.raises(ConfigError) as caught:
        open_provider("openai", "m", {"max_backof": 1}, registry=registry())
    assert caught.value.fix == "rename it to 'max_backoff'"
    with pytest.raises(ConfigError, match="expected a number"):
        open_provider("anthropic", "m", {"timeout": "10"}, registry=registry())
    monkeypatch.delenv("OLO_TEST_KEY")
    with pytest.raises(ConfigError, match="evaluator 'x', provider 'anthropic': the environment variable OLO_TEST_KEY"):
        open_provider("anthropic", "m", {"api_key_env": "OLO_TEST_KEY"}, what="evaluator 'x'", registry=registry())
