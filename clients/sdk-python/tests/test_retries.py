"""
Retries: only after 429 and 529, waiting what the service asks; never after 503, 504, a timeout or a
dropped connection. The real service gives the 429s; the named fakes give the rest.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from decision_service import (
    APIConnectionError,
    APIConnectionTimeoutError,
    AsyncClient,
    Client,
    GatewayTimeoutError,
    OverloadedError,
    RateLimitError,
    ServiceUnavailableError,
    noul,
)

from .conftest import Stack, require
from .fakes import FakeService, FakeServiceAnswering, FakeServiceDroppingConnections, FakeServiceHanging

QUESTIONS = {"q": noul("?")}


def fake_client(fake: FakeService, **options: Any) -> Client:
    return Client(api_key="svc_test-key-for-a-fake", base_url=fake.url, **options)


@pytest.fixture
def statuses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The status of every response any sync client receives during the test."""
    seen: list[int] = []
    send = httpx.Client.send

    def recording(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        response = send(self, request, **kwargs)
        seen.append(response.status_code)
        return response

    monkeypatch.setattr(httpx.Client, "send", recording)
    yield seen


def test_a_decision_its_token_limit_always_refuses_is_sent_1_plus_max_retries_times(stack: Stack, statuses: list[int]) -> None:
    key = require(stack.limited_api_key, "SVC_TEST_LIMITED_API_KEY")
    with pytest.raises(RateLimitError):
        Client(api_key=key, base_url=stack.base_url, max_retries=2).system_one(state="s", questions=QUESTIONS)
    assert statuses == [429, 429, 429]
    statuses.clear()
    with pytest.raises(RateLimitError):
        Client(api_key=key, base_url=stack.base_url).system_one(state="s", questions=QUESTIONS, max_retries=0)
    assert statuses == [429]


def test_retries_a_529_honouring_retry_after_ms_then_raises_the_overloaded_error() -> None:
    with FakeServiceAnswering(529, {"retry-after-ms": "100", "retry-after": "1"}) as fake:
        began = time.monotonic()
        with pytest.raises(OverloadedError) as caught:
            fake_client(fake).system_one(state="s", questions=QUESTIONS)
        assert 0.2 <= time.monotonic() - began < 1
        assert (caught.value.status, caught.value.code, caught.value.request_id) == (529, "lane_full", "req_fake3")
        assert fake.requests == 3


def test_backs_off_exponentially_after_a_529_that_names_no_wait() -> None:
    with FakeServiceAnswering(529) as fake:
        began = time.monotonic()
        with pytest.raises(OverloadedError):
            fake_client(fake, max_retries=2).models.list()
        # 0.5 s then 1 s, each less up to a quarter of jitter.
        assert 1.125 <= time.monotonic() - began < 3
        assert fake.requests == 3


def test_does_not_wait_out_a_retry_after_over_a_minute() -> None:
    with FakeServiceAnswering(529, {"retry-after": "120"}) as fake:
        with pytest.raises(OverloadedError) as caught:
            fake_client(fake).models.list()
        assert caught.value.retry_after == 120
        assert fake.requests == 1


def test_never_resends_a_decision_after_503_504_a_timeout_or_a_dropped_connection() -> None:
    with (
        FakeServiceAnswering(503, {"retry-after": "1"}) as unavailable,
        FakeServiceAnswering(504) as timeout,
        FakeServiceHanging() as hanging,
        FakeServiceDroppingConnections() as dropping,
    ):
        with pytest.raises(ServiceUnavailableError):
            fake_client(unavailable, max_retries=5).system_one(state="s", questions=QUESTIONS)
        with pytest.raises(GatewayTimeoutError):
            fake_client(timeout, max_retries=5).system_one(state="s", questions=QUESTIONS)
        began = time.monotonic()
        with pytest.raises(APIConnectionTimeoutError) as late:
            fake_client(hanging, max_retries=5, timeout=0.3).system_one(state="s", questions=QUESTIONS)
        assert isinstance(late.value, APIConnectionError)
        assert late.value.status is None and "within 0.3 s" in late.value.message
        assert time.monotonic() - began < 2
        with pytest.raises(APIConnectionError) as dropped:
            fake_client(dropping, max_retries=5).system_one(state="s", questions=QUESTIONS)
        assert not isinstance(dropped.value, APIConnectionTimeoutError)
        for fake in (unavailable, timeout, hanging, dropping):
            assert fake.requests == 1


def test_the_async_client_follows_the_same_rules() -> None:
    async def scenario(overloaded: FakeService, unavailable: FakeService, hanging: FakeService, dropping: FakeService) -> None:
        def make(fake: FakeService, **options: Any) -> AsyncClient:
            return AsyncClient(api_key="svc_fake", base_url=fake.url, max_retries=2, **options)

        with pytest.raises(OverloadedError):
            await make(overloaded).system_one(state="s", questions=QUESTIONS)
        with pytest.raises(ServiceUnavailableError):
            await make(unavailable).system_one(state="s", questions=QUESTIONS)
        with pytest.raises(APIConnectionTimeoutError):
            await make(hanging, timeout=0.3).system_one(state="s", questions=QUESTIONS)
        with pytest.raises(APIConnectionError):
            await make(dropping).system_one(state="s", questions=QUESTIONS)

    with (
        FakeServiceAnswering(529, {"retry-after-ms": "10"}) as overloaded,
        FakeServiceAnswering(503) as unavailable,
        FakeServiceHanging() as hanging,
        FakeServiceDroppingConnections() as dropping,
    ):
        asyncio.run(scenario(overloaded, unavailable, hanging, dropping))
        assert [f.requests for f in (overloaded, unavailable, hanging, dropping)] == [3, 1, 1, 1]
