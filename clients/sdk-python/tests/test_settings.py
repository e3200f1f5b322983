"""Where a client's settings come from, and the settings it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decision_service import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    SHARED_ALIAS,
    AsyncClient,
    AuthenticationError,
    Client,
    ConfigurationError,
)

from .conftest import Stack

WRONG_KEY = "svc_0000000000000000.not-a-real-secret-of-this-account"


def test_option_then_environment_then_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SVC_API_KEY", "svc_from-env")
    monkeypatch.setenv("SVC_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("SVC_DEFAULT_MODEL", "env-model")
    from_env = Client()
    assert (from_env.base_url, from_env.default_model) == ("http://127.0.0.1:9", "env-model")
    explicit = Client(base_url="https://decisions.example.test/gateway/", default_model="option-model", timeout=5, max_retries=0)
    assert (explicit.base_url, explicit.default_model, explicit.timeout, explicit.max_retries) == (
        "https://decisions.example.test/gateway",
        "option-model",
        5.0,
        0,
    )
    monkeypatch.delenv("SVC_DEFAULT_MODEL")
    monkeypatch.setenv("SVC_BASE_URL", "")  # empty is unset
    defaults = Client(base_url="http://localhost:9")
    assert (defaults.default_model, defaults.timeout, defaults.max_retries) == (SHARED_ALIAS, 60.0, 2)
    assert (SHARED_ALIAS, DEFAULT_TIMEOUT, DEFAULT_MAX_RETRIES) == ("svc-shared", 60.0, 2)
    assert AsyncClient(base_url="http://[::1]:9").default_model == SHARED_ALIAS


def test_explicit_key_wins_over_the_environment_and_the_environment_is_used_without_one(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SVC_BASE_URL", stack.base_url)
    monkeypatch.setenv("SVC_API_KEY", stack.api_key)
    assert len(Client().models.list().models) > 0
    with pytest.raises(AuthenticationError):
        Client(api_key=WRONG_KEY).models.list()
    monkeypatch.setenv("SVC_API_KEY", WRONG_KEY)
    with pytest.raises(AuthenticationError):
        Client().models.list()
    assert len(Client(api_key=stack.api_key).models.list().models) > 0


def test_a_key_and_a_base_url_are_required_and_never_come_from_the_tools_saved_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = tmp_path / ".svc" / "config.json"
    saved.parent.mkdir(mode=0o700)
    saved.write_text(json.dumps({"api_key": "svc_saved", "base_url": "http://127.0.0.1:9"}))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SVC_CONFIG_PATH", str(saved))
    with pytest.raises(ConfigurationError, match=r"no API key: pass api_key= .* or set SVC_API_KEY"):
        Client()
    with pytest.raises(ConfigurationError, match=r"no base URL: .*SVC_BASE_URL.*no default address"):
        Client(api_key="svc_x")
    with pytest.raises(ConfigurationError, match="no API key"):
        Client(api_key="", base_url="http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match="no API key"):
        AsyncClient()


@pytest.mark.parametrize(
    "url",
    ["https://decisions.example.test", "http://127.0.0.1:8787", "http://127.5.6.7", "http://localhost:1", "http://[::1]:8787/"],
)
def test_https_anywhere_and_http_only_to_loopback(url: str) -> None:
    assert Client(api_key="svc_x", base_url=url).base_url == url.rstrip("/")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://decisions.example.test", r"plaintext http:// to a remote host \(decisions.example.test\)"),
        ("http://10.0.0.1:8787", "plaintext http://"),
        ("ftp://decisions.example.test", "must use https://"),
        ("decisions.example.test", "not a valid URL"),
        ("https://user:pw@decisions.example.test", "must not hold credentials"),
        ("https://decisions.example.test/?x=1", "must not hold credentials, a query"),
        ("https://decisions.example.test/v1/systemone", r"without /v1/...: use https://decisions.example.test$"),
    ],
)
def test_refused_base_urls(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Client(api_key="svc_x", base_url=url)


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan")])
def test_refuses_a_timeout_that_cannot_work(timeout: float) -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        Client(api_key="svc_x", base_url="http://127.0.0.1:9", timeout=timeout)


@pytest.mark.parametrize("retries", [-1, 1.5, True])
def test_refuses_a_retry_count_that_cannot_work(retries: int) -> None:
    with pytest.raises(ConfigurationError, match="max_retries"):
        Client(api_key="svc_x", base_url="http://127.0.0.1:9", max_retries=retries)


def test_keeps_the_api_key_out_of_the_printed_form() -> None:
    secret = "svc_abcdef.secret-material-that-must-not-print"
    client = Client(api_key=secret, base_url="http://127.0.0.1:9")
    assert secret not in repr(client)
