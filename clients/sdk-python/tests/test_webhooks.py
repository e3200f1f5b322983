"""
client.webhooks, sync and async. `verify`: the Standard Webhooks published test vector at its time,
and every way a delivery is refused (a changed body, id or timestamp, a replay outside the
tolerance, no matching v1 signature among several, a missing header), with the secret from the
argument, the client option or SVC_WEBHOOK_SECRET. From the named recording fake, what the
endpoint routes send and how their answers are read (pages of deliveries by the last delivery's
id). Against the real stack: create, list, retrieve, rotate, the delivery log and delete; the
account's limit (409 `webhook_endpoint_limit`); and real deliveries of a cancelled batch, sent by the
stack's sidecar to the suite's receiver and verified here, before and after a rotation.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest

from decision_service import (
    WEBHOOK_ENDPOINTS_MAX,
    WEBHOOK_TOLERANCE_SECONDS,
    AsyncClient,
    Client,
    ConfigurationError,
    ConflictError,
    DeletedWebhookEndpoint,
    InputError,
    NotFoundError,
    UnprocessableEntityError,
    WebhookDelivery,
    WebhookDeliveryList,
    WebhookEndpoint,
    WebhookEndpointList,
    WebhookEndpointWithSecret,
    WebhookEvent,
    WebhookVerificationError,
)
from decision_service.resources import webhooks as webhooks_module

from .conftest import Stack, remember, require
from .fakes import FakeServiceRecording

# The Standard Webhooks specification's published test vector.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = '{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

OTHER_SECRET = "whsec_" + base64.b64encode(b"another endpoint's 32-byte key!!").decode()
ENDPOINT_ID = "7d6f0a52-8a1e-4b8e-9a43-0c3f6f1e2d10"
ENDPOINT: dict[str, Any] = {
    "id": ENDPOINT_ID,
    "object": "webhook_endpoint",
    "url": "https://example.com/hooks",
    "events": ["batch.completed", "batch.failed"],
    "description": "orders",
    "created_at": "2026-11-01T10:00:00.000Z",
    "secret_rotated_at": None,
}
SECRET = "whsec_" + "A" * 43 + "="
EVENT: dict[str, Any] = {"type": "batch.completed", "timestamp": "2026-11-01T10:00:00.000Z", "data": {"object": "batch", "id": "b1", "status": "completed", "metadata": {"order": "A-17"}}}


def delivery(n: int) -> dict[str, Any]:
    return {
        "id": f"00000000-0000-4000-8000-{n:012d}",
        "object": "webhook_delivery",
        "event_id": f"evt_{n}",
        "event_type": "batch.completed",
        "job_id": f"job_{n}",
        "status": "delivered",
        "attempts": 1,
        "created_at": "2026-11-01T10:00:00.000Z",
        "last_attempt_at": "2026-11-01T10:00:01.000Z",
        "last_status_code": 200,
        "last_error": None,
        "next_attempt_at": None,
        "finished_at": "2026-11-01T10:00:01.000Z",
    }


def sign(secret: str, event_id: str, timestamp: int, body: str | bytes) -> str:
    """`v1,<signature>` as the Standard Webhooks specification defines it, written apart from the SDK's."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    raw = body.encode() if isinstance(body, str) else body
    digest = hmac.new(key, f"{event_id}.{timestamp}.".encode() + raw, hashlib.sha256).digest()
    return f"v1,{base64.b64encode(digest).decode()}"


def vector_headers(**changes: str) -> dict[str, str]:
    headers = {"webhook-id": VECTOR_ID, "webhook-timestamp": str(VECTOR_TIMESTAMP), "webhook-signature": VECTOR_SIGNATURE}
    return {**headers, **changes}


def signed(body: str, *secrets: str, event_id: str = "evt_1", timestamp: int | None = None) -> dict[str, str]:
    at = int(time.time()) if timestamp is None else timestamp
    return {"webhook-id": event_id, "webhook-timestamp": str(at), "webhook-signature": " ".join(sign(s, event_id, at, body) for s in secrets)}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Sets the receiver's clock `verify` reads."""

    def set_to(now: float) -> None:
        monkeypatch.setattr(webhooks_module, "_now", lambda: now)

    return set_to


@pytest.fixture
def receiver_client() -> Iterator[Client]:
    with Client(api_key="svc_unused", base_url="http://127.0.0.1:9") as client:
        yield client


# ---- verify ----


def test_the_published_test_vector_verifies_at_its_time(receiver_client: Client, clock: Callable[[float], None]) -> None:
    clock(VECTOR_TIMESTAMP)
    receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(), VECTOR_SECRET)
    receiver_client.webhooks.verify_signature(VECTOR_BODY.encode(), vector_headers(), VECTOR_SECRET)
    # Header names in any case, and any mapping of headers.
    mixed = {"Webhook-Id": VECTOR_ID, "WEBHOOK-TIMESTAMP": str(VECTOR_TIMESTAMP), "Webhook-Signature": VECTOR_SIGNATURE}
    receiver_client.webhooks.verify_signature(VECTOR_BODY, mixed, VECTOR_SECRET)
    receiver_client.webhooks.verify_signature(VECTOR_BODY, httpx.Headers(mixed), VECTOR_SECRET)
    # At the edges of the tolerance, either way.
    for now in (VECTOR_TIMESTAMP - WEBHOOK_TOLERANCE_SECONDS, VECTOR_TIMESTAMP + WEBHOOK_TOLERANCE_SECONDS):
        clock(now)
        receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(), VECTOR_SECRET)
    # Its body is no webhook event of this service: the signature holds, the event does not.
    clock(VECTOR_TIMESTAMP)
    with pytest.raises(WebhookVerificationError, match="not a webhook event"):
        receiver_client.webhooks.verify(VECTOR_BODY, vector_headers(), VECTOR_SECRET)


@pytest.mark.parametrize(
    ("body", "changes"),
    [
        ('{"test": 2432232315}', {}),
        ('{"test":2432232314}', {}),
        (VECTOR_BODY + "\n", {}),
        (VECTOR_BODY, {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJeK"}),
        (VECTOR_BODY, {"webhook-timestamp": str(VECTOR_TIMESTAMP + 1)}),
    ],
    ids=["body", "body re-encoded", "body with a newline", "id", "timestamp"],
)
def test_a_changed_body_id_or_timestamp_fails(receiver_client: Client, clock: Callable[[float], None], body: str, changes: dict[str, str]) -> None:
    clock(VECTOR_TIMESTAMP)
    with pytest.raises(WebhookVerificationError, match="no v1 signature .* matches this secret"):
        receiver_client.webhooks.verify_signature(body, vector_headers(**changes), VECTOR_SECRET)


def test_a_replay_outside_the_tolerance_fails(receiver_client: Client, clock: Callable[[float], None]) -> None:
    clock(VECTOR_TIMESTAMP + WEBHOOK_TOLERANCE_SECONDS + 1)
    with pytest.raises(WebhookVerificationError, match=r"webhook-timestamp is 301 s old, more than the tolerance of 300 s"):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(), VECTOR_SECRET)
    clock(VECTOR_TIMESTAMP - WEBHOOK_TOLERANCE_SECONDS - 1)
    with pytest.raises(WebhookVerificationError, match="in the future"):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(), VECTOR_SECRET)
    # A tolerance of the receiver's own.
    clock(VECTOR_TIMESTAMP + 3600)
    receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(), VECTOR_SECRET, tolerance=3600)
    with pytest.raises(WebhookVerificationError, match="old"):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(), VECTOR_SECRET, tolerance=3599)
    with pytest.raises(ConfigurationError, match="tolerance"):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(), VECTOR_SECRET, tolerance=-1)


@pytest.mark.parametrize(
    "header",
    [
        f"v1,bm90IGEgc2lnbmF0dXJl {VECTOR_SIGNATURE}",
        f"{VECTOR_SIGNATURE} v1,bm90IGEgc2lnbmF0dXJl",
        f"v2,x  {VECTOR_SIGNATURE}",
    ],
)
def test_one_matching_signature_among_several_verifies(receiver_client: Client, clock: Callable[[float], None], header: str) -> None:
    clock(VECTOR_TIMESTAMP)
    receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(**{"webhook-signature": header}), VECTOR_SECRET)


@pytest.mark.parametrize(
    "header",
    [
        "v1,bm90IGEgc2lnbmF0dXJl v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE",
        VECTOR_SIGNATURE.replace("v1,", "v2,"),
        VECTOR_SIGNATURE.replace("v1,", ""),
        VECTOR_SIGNATURE.replace("v1,", "v1a,"),
        "v1,",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=é",
    ],
    ids=["none of several", "another version", "no version", "v1a", "empty", "not ascii"],
)
def test_no_matching_v1_signature_fails(receiver_client: Client, clock: Callable[[float], None], header: str) -> None:
    clock(VECTOR_TIMESTAMP)
    with pytest.raises(WebhookVerificationError, match="no v1 signature"):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(**{"webhook-signature": header}), VECTOR_SECRET)
    with pytest.raises(WebhookVerificationError):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(), OTHER_SECRET)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_or_empty_header_fails(receiver_client: Client, clock: Callable[[float], None], missing: str) -> None:
    clock(VECTOR_TIMESTAMP)
    without = {k: v for k, v in vector_headers().items() if k != missing}
    with pytest.raises(WebhookVerificationError, match=f"missing header {missing}"):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, without, VECTOR_SECRET)
    with pytest.raises(WebhookVerificationError, match=f"missing header {missing}"):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, {**without, missing: ""}, VECTOR_SECRET)
    with pytest.raises(WebhookVerificationError, match="missing header webhook-id, webhook-timestamp, webhook-signature"):
        receiver_client.webhooks.verify(VECTOR_BODY, {}, VECTOR_SECRET)


@pytest.mark.parametrize("timestamp", ["1614265330.0", "-1614265330", "", " 1614265330", "1614265330000000", "١٦١٤٢٦٥٣٣٠"])
def test_a_timestamp_that_is_not_whole_seconds_fails(receiver_client: Client, clock: Callable[[float], None], timestamp: str) -> None:
    clock(VECTOR_TIMESTAMP)
    with pytest.raises(WebhookVerificationError, match="webhook-timestamp"):
        receiver_client.webhooks.verify_signature(VECTOR_BODY, vector_headers(**{"webhook-timestamp": timestamp}), VECTOR_SECRET)


def test_verify_returns_the_event_and_takes_either_secret_after_a_rotation() -> None:
    body = json.dumps(EVENT)
    with Client(api_key="svc_unused", base_url="http://127.0.0.1:9") as client:
        event = client.webhooks.verify(body, signed(body, SECRET), SECRET)
        assert isinstance(event, WebhookEvent)
        assert (event.type, event.data.object, event.data.id, event.data.status, event.data.metadata) == ("batch.completed", "batch", "b1", "completed", {"order": "A-17"})
        assert client.webhooks.verify(body.encode(), signed(body, SECRET), SECRET) == event
        # Both secrets sign for a day after a rotation: either verifies, a third does not.
        both = signed(body, OTHER_SECRET, SECRET)
        assert client.webhooks.verify(body, both, SECRET) == client.webhooks.verify(body, both, OTHER_SECRET) == event
        stranger = "whsec_" + base64.b64encode(b"x" * 32).decode()
        with pytest.raises(WebhookVerificationError, match="no v1 signature"):
            client.webhooks.verify(body, both, stranger)
        # A secret given without its prefix is the same key.
        assert client.webhooks.verify(body, both, SECRET.removeprefix("whsec_")) == event
        # A newer service's fields are ignored.
        newer = json.dumps({**EVENT, "livemode": False, "data": {**EVENT["data"], "attempt": 2}})
        assert client.webhooks.verify(newer, signed(newer, SECRET), SECRET) == event
        not_json = "it is not JSON"
        with pytest.raises(WebhookVerificationError, match="not JSON"):
            client.webhooks.verify(not_json, signed(not_json, SECRET), SECRET)
        client.webhooks.verify_signature(not_json, signed(not_json, SECRET), SECRET)


def test_the_secret_is_the_argument_else_the_client_option_else_svc_webhook_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    body = json.dumps(EVENT)
    headers = signed(body, SECRET)
    with Client(api_key="svc_unused", base_url="http://127.0.0.1:9") as bare:
        with pytest.raises(ConfigurationError, match="no webhook secret: pass secret= .*webhook_secret= .*SVC_WEBHOOK_SECRET"):
            bare.webhooks.verify(body, headers)
        for broken in ("whsec_", "whsec_not base64!", "whsec_QUJ", "whsec_QU=J", "whsec_ÄÖÜ"):
            with pytest.raises(ConfigurationError, match="not whsec_ followed by base64"):
                bare.webhooks.verify(body, headers, broken)
    with Client(api_key="svc_unused", base_url="http://127.0.0.1:9", webhook_secret=SECRET) as configured:
        assert configured.webhooks.verify(body, headers).data.id == "b1"
        with pytest.raises(WebhookVerificationError):
            configured.webhooks.verify(body, headers, OTHER_SECRET)
    monkeypatch.setenv("SVC_WEBHOOK_SECRET", SECRET)
    with Client(api_key="svc_unused", base_url="http://127.0.0.1:9") as from_env:
        assert from_env.webhooks.verify(body, headers).data.id == "b1"
    with Client(api_key="svc_unused", base_url="http://127.0.0.1:9", webhook_secret=OTHER_SECRET) as option_wins:
        with pytest.raises(WebhookVerificationError):
            option_wins.webhooks.verify(body, headers)
    # The async client verifies alike, without awaiting: nothing is sent.
    assert AsyncClient(api_key="svc_unused", base_url="http://127.0.0.1:9").webhooks.verify(body, headers).data.id == "b1"


# ---- the endpoint routes, on the wire ----


def error(status: int, code: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": f"fake {code}", "status": status}}


def test_the_routes_send_the_access_token_and_read_their_answers() -> None:
    rotated = {**ENDPOINT, "secret_rotated_at": "2026-11-02T00:00:00.000Z", "secret": SECRET}
    answers: list[tuple[int, object]] = [
        (201, {**ENDPOINT, "secret": SECRET}),
        (201, {**ENDPOINT, "description": None, "secret": SECRET}),
        (200, {"object": "list", "data": [ENDPOINT]}),
        (200, ENDPOINT),
        (200, rotated),
        (200, {"id": ENDPOINT_ID, "object": "webhook_endpoint", "deleted": True}),
    ]
    with FakeServiceRecording(*answers) as fake, Client(api_key="svc_the-key", access_token="the-token", base_url=fake.url) as client:
        created = client.webhooks.create(url="https://example.com/hooks", events=("batch.completed", "batch.failed"), description="orders")
        plain = client.webhooks.create(url="https://example.com/hooks", events=["batch.completed"])
        listed = client.webhooks.list()
        read = client.webhooks.retrieve(ENDPOINT_ID)
        new_secret = client.webhooks.rotate_secret(ENDPOINT_ID)
        deleted = client.webhooks.delete(ENDPOINT_ID)
    assert [(s.method, s.path, s.headers["authorization"]) for s in fake.seen] == [
        ("POST", "/v1/webhooks", "Bearer the-token"),
        ("POST", "/v1/webhooks", "Bearer the-token"),
        ("GET", "/v1/webhooks", "Bearer the-token"),
        ("GET", f"/v1/webhooks/{ENDPOINT_ID}", "Bearer the-token"),
        ("POST", f"/v1/webhooks/{ENDPOINT_ID}/rotate_secret", "Bearer the-token"),
        ("DELETE", f"/v1/webhooks/{ENDPOINT_ID}", "Bearer the-token"),
    ]
    assert fake.seen[0].json() == {"url": "https://example.com/hooks", "events": ["batch.completed", "batch.failed"], "description": "orders"}
    assert fake.seen[1].json() == {"url": "https://example.com/hooks", "events": ["batch.completed"]}
    assert fake.seen[4].json() == {}
    assert isinstance(created, WebhookEndpointWithSecret) and isinstance(created, WebhookEndpoint)
    assert (created.secret, created.events, created.description, created.request_id) == (SECRET, ["batch.completed", "batch.failed"], "orders", "req_fake1")
    assert plain.description is None
    assert isinstance(listed, WebhookEndpointList) and listed.data == [WebhookEndpoint.model_validate(ENDPOINT)]
    assert read == WebhookEndpoint.model_validate(ENDPOINT)
    assert (new_secret.secret, new_secret.secret_rotated_at) == (SECRET, "2026-11-02T00:00:00.000Z")
    assert isinstance(deleted, DeletedWebhookEndpoint) and (deleted.id, deleted.deleted) == (ENDPOINT_ID, True)


def test_deliveries_are_paged_after_the_last_delivery_of_each_page() -> None:
    answers: list[tuple[int, object]] = [
        (200, {"object": "list", "data": [delivery(1), delivery(2)], "has_more": True}),
        (200, {"object": "list", "data": [delivery(3)], "has_more": False}),
        (200, {"object": "list", "data": [], "has_more": False}),
    ]
    with FakeServiceRecording(*answers) as fake, Client(access_token="the-token", base_url=fake.url) as client:
        first = client.webhooks.deliveries.list(ENDPOINT_ID, limit=2)
        assert isinstance(first, WebhookDeliveryList) and first.has_more
        assert first.next_cursor == delivery(2)["id"]
        assert [d.event_id for d in first] == ["evt_1", "evt_2", "evt_3"]
        empty = client.webhooks.deliveries.list(ENDPOINT_ID, after=delivery(3)["id"])
    assert (empty.data, empty.has_more, empty.next_cursor) == ([], False, None)
    assert [s.path for s in fake.seen] == [
        f"/v1/webhooks/{ENDPOINT_ID}/deliveries?limit=2",
        f"/v1/webhooks/{ENDPOINT_ID}/deliveries?limit=2&after={delivery(2)['id']}",
        f"/v1/webhooks/{ENDPOINT_ID}/deliveries?after={delivery(3)['id']}",
    ]
    assert all(s.headers["authorization"] == "Bearer the-token" for s in fake.seen)
    assert isinstance(first.data[0], WebhookDelivery) and first.data[0].last_status_code == 200


def test_the_async_client_sends_and_reads_the_same() -> None:
    async def scenario(url: str) -> tuple[WebhookEndpointWithSecret, WebhookEndpointList, list[str], WebhookDeliveryList, DeletedWebhookEndpoint]:
        async with AsyncClient(access_token="the-token", base_url=url) as client:
            created = await client.webhooks.create(url="https://example.com/hooks", events=["batch.completed"])
            listed = await client.webhooks.list()
            await client.webhooks.retrieve(ENDPOINT_ID)
            await client.webhooks.rotate_secret(ENDPOINT_ID)
            every = [d.event_id async for d in client.webhooks.deliveries.list(ENDPOINT_ID, limit=2)]
            page = await client.webhooks.deliveries.list(ENDPOINT_ID)
            return created, listed, every, page, await client.webhooks.delete(ENDPOINT_ID)

    answers: list[tuple[int, object]] = [
        (201, {**ENDPOINT, "secret": SECRET}),
        (200, {"object": "list", "data": [ENDPOINT]}),
        (200, ENDPOINT),
        (200, {**ENDPOINT, "secret": SECRET, "secret_rotated_at": "2026-11-02T00:00:00.000Z"}),
        (200, {"object": "list", "data": [delivery(1), delivery(2)], "has_more": True}),
        (200, {"object": "list", "data": [delivery(3)], "has_more": False}),
        (200, {"object": "list", "data": [delivery(1)], "has_more": False}),
        (200, {"id": ENDPOINT_ID, "object": "webhook_endpoint", "deleted": True}),
    ]
    with FakeServiceRecording(*answers) as fake:
        created, listed, every, page, deleted = asyncio.run(scenario(fake.url))
    assert [(s.method, s.path) for s in fake.seen] == [
        ("POST", "/v1/webhooks"),
        ("GET", "/v1/webhooks"),
        ("GET", f"/v1/webhooks/{ENDPOINT_ID}"),
        ("POST", f"/v1/webhooks/{ENDPOINT_ID}/rotate_secret"),
        ("GET", f"/v1/webhooks/{ENDPOINT_ID}/deliveries?limit=2"),
        ("GET", f"/v1/webhooks/{ENDPOINT_ID}/deliveries?limit=2&after={delivery(2)['id']}"),
        ("GET", f"/v1/webhooks/{ENDPOINT_ID}/deliveries"),
        ("DELETE", f"/v1/webhooks/{ENDPOINT_ID}"),
    ]
    assert {s.headers["authorization"] for s in fake.seen} == {"Bearer the-token"}
    assert (created.secret, [e.id for e in listed.data], every, page.next_cursor, deleted.deleted) == (SECRET, [ENDPOINT_ID], ["evt_1", "evt_2", "evt_3"], None, True)


def test_what_the_client_refuses_before_sending_and_the_limit_error() -> None:
    with FakeServiceRecording((409, error(409, "webhook_endpoint_limit"))) as fake:
        with Client(api_key="svc_key", base_url=fake.url) as no_token:
            attempts: list[Callable[[], object]] = [
                lambda: no_token.webhooks.create(url="https://example.com/hooks", events=["batch.completed"]),
                no_token.webhooks.list,
                lambda: no_token.webhooks.retrieve(ENDPOINT_ID),
                lambda: no_token.webhooks.delete(ENDPOINT_ID),
                lambda: no_token.webhooks.rotate_secret(ENDPOINT_ID),
                lambda: no_token.webhooks.deliveries.list(ENDPOINT_ID),
                lambda: AsyncClient(api_key="svc_key", base_url=fake.url).webhooks.deliveries.list(ENDPOINT_ID),
            ]
            for attempt in attempts:
                with pytest.raises(ConfigurationError, match="no access token"):
                    attempt()
        with Client(access_token="t", base_url=fake.url, max_retries=3) as session:
            with pytest.raises(InputError, match="a list of event names"):
                session.webhooks.create(url="https://example.com/hooks", events="batch.completed")  # type: ignore[arg-type]
            for empty in (lambda: session.webhooks.retrieve(""), lambda: session.webhooks.deliveries.list("")):
                with pytest.raises(InputError, match="webhook endpoint id"):
                    empty()
            assert fake.seen == []
            with pytest.raises(ConflictError) as full:
                session.webhooks.create(url="https://example.com/hooks", events=["batch.completed"])
    assert (full.value.status, full.value.code, len(fake.seen)) == (409, "webhook_endpoint_limit", 1)


# ---- against the real stack ----


def remembered(endpoint: WebhookEndpointWithSecret) -> WebhookEndpointWithSecret:
    """A secret the stack made: the suite's log scan looks for it."""
    remember(endpoint.secret)
    return endpoint


def test_endpoints_are_created_listed_read_rotated_and_deleted(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    with Client(access_token=token, base_url=stack.base_url) as session:
        created = remembered(session.webhooks.create(url="http://127.0.0.1:9/python-sdk", events=["batch.completed", "training.ready"], description="python sdk"))
        try:
            assert (created.object, created.url, created.events, created.description, created.secret_rotated_at) == (
                "webhook_endpoint", "http://127.0.0.1:9/python-sdk", ["batch.completed", "training.ready"], "python sdk", None
            )
            assert created.secret.startswith("whsec_") and len(base64.b64decode(created.secret.removeprefix("whsec_"))) == 32
            assert created.request_id is not None and created.request_id.startswith("req_")
            without_secret = WebhookEndpoint.model_validate(created.model_dump(exclude={"secret"}))
            listed = session.webhooks.list()
            assert listed.data[0] == without_secret, "newest first"
            assert created.secret not in listed.model_dump_json()
            assert session.webhooks.retrieve(created.id) == without_secret

            rotated = remembered(session.webhooks.rotate_secret(created.id))
            assert rotated.secret != created.secret and rotated.secret_rotated_at is not None
            assert session.webhooks.retrieve(created.id).secret_rotated_at == rotated.secret_rotated_at
            page = session.webhooks.deliveries.list(created.id)
            assert (page.data, page.has_more, page.next_cursor) == ([], False, None)

            with pytest.raises(UnprocessableEntityError, match="event must be one of") as unknown_event:
                session.webhooks.create(url="http://127.0.0.1:9/python-sdk", events=["batch.done"])  # type: ignore[list-item]
            assert unknown_event.value.code == "invalid_request"
            with pytest.raises(UnprocessableEntityError, match="https"):
                session.webhooks.create(url="http://hooks.example.com/", events=["batch.completed"])
        finally:
            deleted = session.webhooks.delete(created.id)
        assert (deleted.id, deleted.object, deleted.deleted) == (created.id, "webhook_endpoint", True)
        for gone in (lambda: session.webhooks.retrieve(created.id), lambda: session.webhooks.delete(created.id), lambda: session.webhooks.deliveries.list(created.id)):
            with pytest.raises(NotFoundError) as not_found:
                gone()
            assert (not_found.value.status, not_found.value.code) == (404, "not_found")


def test_an_account_has_at_most_its_limit_of_endpoints(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")

    async def scenario() -> ConflictError:
        async with AsyncClient(access_token=token, base_url=stack.base_url) as session:
            existing = len((await session.webhooks.list()).data)
            made: list[WebhookEndpointWithSecret] = []
            try:
                for i in range(WEBHOOK_ENDPOINTS_MAX - existing):
                    made.append(remembered(await session.webhooks.create(url=f"http://127.0.0.1:9/limit-{i}", events=["training.expired"])))
                with pytest.raises(ConflictError) as full:
                    await session.webhooks.create(url="http://127.0.0.1:9/one-more", events=["training.expired"])
                # Deleting one frees its place.
                await session.webhooks.delete(made.pop().id)
                made.append(remembered(await session.webhooks.create(url="http://127.0.0.1:9/again", events=["training.expired"])))
                return full.value
            finally:
                for endpoint in made:
                    await session.webhooks.delete(endpoint.id)

    refused = asyncio.run(scenario())
    assert (type(refused), refused.status, refused.code) == (ConflictError, 409, "webhook_endpoint_limit")
    assert str(WEBHOOK_ENDPOINTS_MAX) in refused.message


def _deliveries_about(stack: Stack, job_id: str, count: int = 1, timeout: float = 60) -> list[dict[str, Any]]:
    """What the suite's receiver got about `job_id`, once it has `count` of them."""
    where = require(stack.webhook_received, "SVC_TEST_WEBHOOK_RECEIVED")
    deadline = time.monotonic() + timeout
    while True:
        received: list[dict[str, Any]] = httpx.get(where, timeout=10).json()
        about = [r for r in received if json.loads(r["body"]).get("data", {}).get("id") == job_id]
        if len(about) >= count:
            return about
        assert time.monotonic() < deadline, f"the receiver got {len(about)} of {count} deliveries about {job_id} in {timeout} s"
        time.sleep(0.2)


def _until_delivered(session: Client, endpoint_id: str, count: int) -> list[WebhookDelivery]:
    deadline = time.monotonic() + 30
    while True:
        log = list(session.webhooks.deliveries.list(endpoint_id))
        if len(log) >= count and all(d.status == "delivered" for d in log):
            return log
        assert time.monotonic() < deadline, f"the delivery log is {[(d.status, d.last_error) for d in log]}"
        time.sleep(0.2)


def test_a_real_delivery_verifies_with_its_secret_before_and_after_a_rotation(stack: Stack, clock: Callable[[float], None], monkeypatch: pytest.MonkeyPatch) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    url = require(stack.webhook_url, "SVC_TEST_WEBHOOK_URL")
    with Client(api_key=stack.api_key, access_token=token, base_url=stack.base_url) as client:

        def cancelled_batch() -> tuple[str, str, Mapping[str, str]]:
            batch = client.batches.create(input_bytes=10, idempotency_key=f"py-webhook-{time.time_ns()}")
            assert client.batches.cancel(batch.id).status == "cancelled"
            received = _deliveries_about(stack, batch.id)[0]
            return batch.id, received["body"], received["headers"]

        endpoint = remembered(client.webhooks.create(url=url, events=["batch.cancelled"], description="python sdk receiver"))
        try:
            first_id, body, headers = cancelled_batch()
            event = client.webhooks.verify(body, headers, endpoint.secret)
            assert (event.type, event.data.object, event.data.id, event.data.status, event.data.metadata) == ("batch.cancelled", "batch", first_id, "cancelled", None)
            assert abs(int(headers["webhook-timestamp"]) - time.time()) < 60
            assert client.webhooks.verify(body.encode(), headers, endpoint.secret) == event
            with Client(api_key=stack.api_key, base_url=stack.base_url, webhook_secret=endpoint.secret) as receiver:
                assert receiver.webhooks.verify(body, headers) == event
            with pytest.raises(WebhookVerificationError, match="no v1 signature"):
                client.webhooks.verify(body.replace("cancelled", "completed"), headers, endpoint.secret)
            with pytest.raises(WebhookVerificationError, match="no v1 signature"):
                client.webhooks.verify(body, {**headers, "webhook-id": headers["webhook-id"] + "x"}, endpoint.secret)
            with pytest.raises(WebhookVerificationError, match="no v1 signature"):
                client.webhooks.verify(body, headers, OTHER_SECRET)
            clock(time.time() + 10 * 60)
            with pytest.raises(WebhookVerificationError, match="old"):
                client.webhooks.verify(body, headers, endpoint.secret)
            monkeypatch.setattr(webhooks_module, "_now", time.time)

            rotated = remembered(client.webhooks.rotate_secret(endpoint.id))
            assert rotated.secret != endpoint.secret
            # The delivery before the rotation was signed with the old secret only.
            with pytest.raises(WebhookVerificationError):
                client.webhooks.verify(body, headers, rotated.secret)
            second_id, second_body, second_headers = cancelled_batch()
            assert len(second_headers["webhook-signature"].split(" ")) == 2, "the new and the previous secret both sign"
            for secret in (rotated.secret, endpoint.secret):
                assert client.webhooks.verify(second_body, second_headers, secret).data.id == second_id
            with pytest.raises(WebhookVerificationError, match="no v1 signature"):
                client.webhooks.verify(second_body.replace(second_id, first_id), second_headers, rotated.secret)

            # The log, newest first, one page at a time by the last delivery's id.
            log = _until_delivered(client, endpoint.id, 2)
            assert [(d.job_id, d.event_type, d.status, d.attempts, d.last_status_code, d.next_attempt_at) for d in log] == [
                (second_id, "batch.cancelled", "delivered", 1, 200, None),
                (first_id, "batch.cancelled", "delivered", 1, 200, None),
            ]
            assert [d.event_id for d in log] == [second_headers["webhook-id"], headers["webhook-id"]]
            first_page = client.webhooks.deliveries.list(endpoint.id, limit=1)
            assert (len(first_page.data), first_page.has_more, first_page.next_cursor) == (1, True, log[0].id)
            assert [len(p.data) for p in first_page.iter_pages()] == [1, 1]
            assert client.webhooks.deliveries.list(endpoint.id, limit=1, after=log[0].id).data == [log[1]]

            async def every_delivery() -> list[str]:
                async with AsyncClient(access_token=token, base_url=stack.base_url) as session:
                    return [d.id async for d in session.webhooks.deliveries.list(endpoint.id, limit=1)]

            assert asyncio.run(every_delivery()) == [d.id for d in log]
        finally:
            client.webhooks.delete(endpoint.id)
