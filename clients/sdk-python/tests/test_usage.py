"""
client.usage (GET /v1/usage), sync and async: against the real stack, the main account's decisions
counted for its key, read with the access token, and the refusals the service gives (a bad range or
grouping, an API key in the token's place); from the named recording fake, what the client sends
(the access token, the query as given, group_by comma-separated) and how it reads the answer.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from decision_service import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConfigurationError,
    UnprocessableEntityError,
    UsageBucket,
    UsageCounts,
    UsageReport,
    noul,
)

from .conftest import Stack, require
from .fakes import FakeServiceRecording

COUNTS: dict[str, int] = {
    "requests": 3,
    "batch_records": 2,
    "input_tokens": 400,
    "billable_input_tokens": 350,
    "billable_unreported": 1,
    "output_tokens": 5,
    "image_credit_micro_usd": 0,
}
ANSWER: dict[str, Any] = {
    "object": "usage",
    "start": "2026-11-01",
    "end": "2026-11-02",
    "group_by": ["day", "key"],
    "data": [
        {"day": "2026-11-01", "key_id": "k1", "key_name": "prod", **COUNTS},
        {"day": "2026-11-02", "key_id": None, "key_name": None, **COUNTS, "requests": 1, "newer_field": True},
    ],
    "totals": {**COUNTS, "requests": 4},
}


def today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


def key_id(api_key: str) -> str:
    """An API key's id, the lookup part of its secret (`svc_<id>_<secret>`)."""
    found = re.fullmatch(r"svc_([a-z2-7]{26})_.+", api_key)
    assert found is not None
    return found.group(1)


def test_retrieve_sends_the_access_token_and_the_query_as_given_and_reads_the_report() -> None:
    with FakeServiceRecording((200, ANSWER), (200, ANSWER), (200, ANSWER)) as fake:
        with Client(api_key="svc_the-key", access_token="the-token", base_url=fake.url) as client:
            report = client.usage.retrieve(start="2026-11-01", end="2026-11-02", group_by=["day", "key"])
            client.usage.retrieve()
            client.usage.retrieve(group_by="key")
    assert [(s.method, s.headers["authorization"]) for s in fake.seen] == [("GET", "Bearer the-token")] * 3
    assert [s.path.replace("%2C", ",") for s in fake.seen] == [
        "/v1/usage?start=2026-11-01&end=2026-11-02&group_by=day,key",
        "/v1/usage",
        "/v1/usage?group_by=key",
    ]
    assert isinstance(report, UsageReport)
    assert (report.object, report.start, report.end, report.group_by) == ("usage", "2026-11-01", "2026-11-02", ["day", "key"])
    assert report.data == [
        UsageBucket(day="2026-11-01", key_id="k1", key_name="prod", **COUNTS),
        UsageBucket.model_validate({"day": "2026-11-02", "key_id": None, "key_name": None, **COUNTS, "requests": 1}),
    ]
    assert report.totals == UsageCounts(**{**COUNTS, "requests": 4})
    assert report.request_id == "req_fake1"


def test_the_async_client_sends_and_reads_the_same() -> None:
    async def scenario(url: str) -> UsageReport:
        async with AsyncClient(access_token="the-token", base_url=url) as client:
            return await client.usage.retrieve(start="2026-11-01", group_by=("key",))

    with FakeServiceRecording((200, ANSWER)) as fake:
        report = asyncio.run(scenario(fake.url))
    (sent,) = fake.seen
    assert (sent.path, sent.headers["authorization"]) == ("/v1/usage?start=2026-11-01&group_by=key", "Bearer the-token")
    assert report.totals.requests == 4


def test_retrieve_without_an_access_token_raises_before_any_request() -> None:
    with FakeServiceRecording() as fake, Client(api_key="svc_key", base_url=fake.url) as client:
        with pytest.raises(ConfigurationError, match=r"no access token: .*usage, .*take a signed-in user's access token"):
            client.usage.retrieve()
        assert fake.seen == []


def test_a_422_is_an_unprocessable_entity_error_and_never_retried() -> None:
    refusal = {"error": {"code": "invalid_request", "message": "at most 30 days at a time", "status": 422}}
    with FakeServiceRecording((422, refusal)) as fake, Client(access_token="t", base_url=fake.url, max_retries=5) as client:
        with pytest.raises(UnprocessableEntityError) as refused:
            client.usage.retrieve(start="2000-01-01")
        assert len(fake.seen) == 1
    assert (refused.value.status, refused.value.code) == (422, "invalid_request")


def test_the_main_accounts_decision_counts_for_its_key_read_with_the_access_token(client: Client, stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    mine = key_id(stack.api_key)
    client.system_one(state="I was charged twice", questions={"refund": noul("Refund?")})
    with Client(api_key=stack.api_key, access_token=token, base_url=stack.base_url) as session:
        # Usage is recorded just after the answer: poll briefly.
        deadline = time.monotonic() + 10
        while True:
            report = session.usage.retrieve(group_by=["key"])
            bucket = next((b for b in report.data if b.key_id == mine), None)
            if (bucket is not None and bucket.requests >= 1) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert bucket is not None and bucket.requests >= 1, report
        assert (report.object, report.group_by, report.end, bucket.day) == ("usage", ["key"], today(), None)
        assert report.totals.requests >= bucket.requests
        assert report.request_id is not None and report.request_id.startswith("req_")
        both = session.usage.retrieve(start=today(), end=today(), group_by=["day", "key"])
        assert [(b.day, b.key_id) for b in both.data if b.key_id == mine] == [(today(), mine)]

    async def by_day() -> UsageReport:
        async with AsyncClient(access_token=token, base_url=stack.base_url) as aclient:
            return await aclient.usage.retrieve(start=today(), end=today(), group_by="day")

    days = asyncio.run(by_day())
    assert [b.day for b in days.data] == [today()]
    assert days.totals.requests >= bucket.requests


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"start": "2026-11-02", "end": "2026-11-01"}, r"start \(2026-11-02\) is after end"),
        ({"start": "2000-01-01", "end": "2000-03-01"}, r"at most 30 days at a time"),
        ({"start": "2026-02-30"}, r"a calendar day"),
        ({"group_by": ["day", "day"]}, r"group_by is day, key, or both"),
    ],
)
def test_a_range_or_grouping_the_service_refuses_is_an_unprocessable_entity_error(stack: Stack, params: dict[str, Any], says: str) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    with Client(access_token=token, base_url=stack.base_url) as session:
        with pytest.raises(UnprocessableEntityError, match=says) as refused:
            session.usage.retrieve(**params)
    assert (refused.value.status, refused.value.code) == (422, "invalid_request")


def test_an_api_key_in_the_access_tokens_place_is_refused_by_the_service(stack: Stack) -> None:
    with Client(api_key=stack.api_key, access_token=stack.api_key, base_url=stack.base_url) as confused:
        with pytest.raises(AuthenticationError) as refused:
            confused.usage.retrieve()
    assert (refused.value.status, refused.value.code) == (401, "wrong_credential_kind")
