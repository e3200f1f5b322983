"""
client.keys (POST /v1/keys, GET /v1/keys, POST /v1/keys/{id}/revoke), sync and async: against the
real stack, a key limited in time, scope and models made with the main account's access token,
listed with its metadata, used for what it may do and refused (403 insufficient_scope) for what it
may not, revoked and then refused (401 revoked_key), and a key past its expiry refused (401
expired_key); from the named recording fake, what the client sends (the access token, the body's
fields as given, a datetime in UTC) and how it reads the answers and maps 401 and 403.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from decision_service import (
    APIError,
    AsyncClient,
    AuthenticationError,
    Client,
    ConfigurationError,
    CreatedKey,
    InputError,
    KeyList,
    KeyMetadata,
    NotFoundError,
    PermissionDeniedError,
    UnprocessableEntityError,
    noul,
)

from .conftest import Stack, remember, require
from .fakes import FakeServiceRecording

KEY_ID = "abcdefghijklmnopqrstuvwxyz"
METADATA: dict[str, Any] = {
    "id": KEY_ID,
    "name": "ci",
    "status": "active",
    "created_at": "2026-11-01T10:00:00.000Z",
    "revoked_at": None,
    "expires_at": "2026-12-31T00:00:00.000Z",
    "scope": "decisions",
    "models": ["svc-shared"],
}
SECRET = f"svc_{KEY_ID}_{'s' * 43}"
QUESTIONS = {"refund": noul("Does the customer want money back?")}


def error(status: int, code: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": f"fake {code}", "status": status}}


def remembered(key: CreatedKey) -> CreatedKey:
    """A key the stack made: its secret and digest go to the suite's log scan."""
    remember(key.secret)
    remember(hashlib.sha256(key.secret.encode()).hexdigest())
    return key


def test_create_list_and_revoke_send_the_access_token_and_the_fields_as_given() -> None:
    answers: list[tuple[int, object]] = [
        (201, {**METADATA, "secret": SECRET}),
        (201, {**METADATA, "scope": None, "models": None, "expires_at": None, "secret": SECRET}),
        (200, {"keys": [METADATA, {**METADATA, "id": "b" * 26, "status": "revoked", "revoked_at": "2026-11-02T00:00:00.000Z", "newer_field": 1}]}),
        (200, {**METADATA, "status": "revoked", "revoked_at": "2026-11-03T00:00:00.000Z"}),
    ]
    with FakeServiceRecording(*answers) as fake:
        with Client(api_key="svc_the-key", access_token="the-token", base_url=fake.url) as client:
            berlin = timezone(timedelta(hours=1))
            created = client.keys.create(name="ci", expires_at=datetime(2026, 12, 31, 1, 0, tzinfo=berlin), scope="decisions", models=("svc-shared",))
            plain = client.keys.create(name="everything")
            listed = client.keys.list()
            revoked = client.keys.revoke(KEY_ID)
    assert [(s.method, s.path, s.headers["authorization"]) for s in fake.seen] == [
        ("POST", "/v1/keys", "Bearer the-token"),
        ("POST", "/v1/keys", "Bearer the-token"),
        ("GET", "/v1/keys", "Bearer the-token"),
        ("POST", f"/v1/keys/{KEY_ID}/revoke", "Bearer the-token"),
    ]
    # A datetime is sent in UTC; what was not given is not sent (the service refuses unknown fields, not absent ones).
    assert fake.seen[0].json() == {"name": "ci", "expires_at": "2026-12-31T00:00:00.000Z", "scope": "decisions", "models": ["svc-shared"]}
    assert fake.seen[1].json() == {"name": "everything"}
    assert fake.seen[3].json() == {}
    assert isinstance(created, CreatedKey) and isinstance(created, KeyMetadata)
    assert (created.secret, created.scope, created.models, created.expires_at, created.request_id) == (SECRET, "decisions", ["svc-shared"], "2026-12-31T00:00:00.000Z", "req_fake1")
    assert (plain.scope, plain.models, plain.expires_at) == (None, None, None)
    assert isinstance(listed, KeyList)
    assert [(k.id, k.status) for k in listed.keys] == [(KEY_ID, "active"), ("b" * 26, "revoked")]
    assert listed.keys[0] == KeyMetadata.model_validate(METADATA)
    assert isinstance(revoked, KeyMetadata) and (revoked.status, revoked.revoked_at) == ("revoked", "2026-11-03T00:00:00.000Z")


def test_an_expiry_string_is_sent_as_given_and_a_naive_datetime_is_refused_before_sending() -> None:
    with FakeServiceRecording((201, {**METADATA, "secret": SECRET})) as fake, Client(access_token="t", base_url=fake.url) as client:
        client.keys.create(name="ci", expires_at="2026-12-31T02:00:00+02:00")
        with pytest.raises(InputError, match="timezone-aware"):
            client.keys.create(name="ci", expires_at=datetime(2026, 12, 31))
        with pytest.raises(InputError, match="a list of model names"):
            client.keys.create(name="ci", models="svc-shared")
    assert [s.json() for s in fake.seen] == [{"name": "ci", "expires_at": "2026-12-31T02:00:00+02:00"}]


def test_the_async_client_sends_and_reads_the_same() -> None:
    async def scenario(url: str) -> tuple[CreatedKey, KeyList, KeyMetadata]:
        async with AsyncClient(access_token="the-token", base_url=url) as client:
            created = await client.keys.create(name="ci", scope="decisions_and_batches", expires_at=datetime(2026, 12, 31, tzinfo=timezone.utc))
            return created, await client.keys.list(), await client.keys.revoke(KEY_ID)

    answers: list[tuple[int, object]] = [
        (201, {**METADATA, "scope": "decisions_and_batches", "secret": SECRET}),
        (200, {"keys": [METADATA]}),
        (200, {**METADATA, "status": "revoked", "revoked_at": "2026-11-03T00:00:00.000Z"}),
    ]
    with FakeServiceRecording(*answers) as fake:
        created, listed, revoked = asyncio.run(scenario(fake.url))
    assert [(s.method, s.path, s.headers["authorization"]) for s in fake.seen] == [
        ("POST", "/v1/keys", "Bearer the-token"),
        ("GET", "/v1/keys", "Bearer the-token"),
        ("POST", f"/v1/keys/{KEY_ID}/revoke", "Bearer the-token"),
    ]
    assert fake.seen[0].json() == {"name": "ci", "expires_at": "2026-12-31T00:00:00.000Z", "scope": "decisions_and_batches"}
    assert (created.secret, created.scope, [k.id for k in listed.keys], revoked.status) == (SECRET, "decisions_and_batches", [KEY_ID], "revoked")


def test_key_management_without_an_access_token_raises_before_any_request() -> None:
    with FakeServiceRecording() as fake, Client(api_key="svc_key", base_url=fake.url) as client:
        for attempt in (lambda: client.keys.create(name="ci"), client.keys.list, lambda: client.keys.revoke(KEY_ID)):
            with pytest.raises(ConfigurationError, match=r"no access token: .*key management.*take a signed-in user's access token"):
                attempt()
        assert fake.seen == []


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [(403, "insufficient_scope", PermissionDeniedError), (401, "expired_key", AuthenticationError), (401, "revoked_key", AuthenticationError)],
)
def test_a_limited_keys_refusals_are_their_statuses_classes_and_never_retried(status: int, code: str, cls: type[APIError]) -> None:
    with FakeServiceRecording((status, error(status, code))) as fake, Client(api_key=SECRET, base_url=fake.url, max_retries=5) as client:
        with pytest.raises(cls) as refused:
            client.batches.create(input_bytes=1)
        assert len(fake.seen) == 1
    assert (type(refused.value), refused.value.status, refused.value.code) == (cls, status, code)


def test_a_limited_key_does_what_it_was_made_for_and_nothing_else_until_revoked(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    release = require(stack.release_id, "SVC_TEST_RELEASE_ID")
    in_an_hour = datetime.now(timezone.utc) + timedelta(hours=1)
    with Client(access_token=token, base_url=stack.base_url) as session:
        key = remembered(session.keys.create(name="python limited", scope="decisions", models=["svc-shared"], expires_at=in_an_hour))
        assert re.fullmatch(rf"svc_{key.id}_[A-Za-z0-9_-]{{43}}", key.secret)
        assert (key.name, key.status, key.scope, key.models, key.revoked_at) == ("python limited", "active", "decisions", ["svc-shared"], None)
        assert key.expires_at is not None
        assert abs(datetime.fromisoformat(key.expires_at) - in_an_hour) < timedelta(seconds=1)
        assert key.request_id is not None and key.request_id.startswith("req_")

        listed = session.keys.list()
        assert listed.keys[0].id == key.id, "newest first"
        assert listed.keys[0] == KeyMetadata.model_validate(key.model_dump(exclude={"secret"}))
        assert "secret" not in listed.model_dump_json()

        with Client(api_key=key.secret, base_url=stack.base_url, max_retries=0) as limited:
            reply = limited.system_one(state="I was charged twice", questions=QUESTIONS)
            assert 0 <= reply.noul_answer("refund").noul <= 1
            with pytest.raises(PermissionDeniedError) as batch:
                limited.batches.create(input_bytes=1)
            assert (batch.value.status, batch.value.code) == (403, "insufficient_scope")
            # The release behind svc-shared is another name: the key may name only what it was made for.
            with pytest.raises(PermissionDeniedError) as other_name:
                limited.system_one(state="I was charged twice", questions=QUESTIONS, model=release)
            assert other_name.value.code == "insufficient_scope"

            revoked = session.keys.revoke(key.id)
            assert (revoked.id, revoked.status) == (key.id, "revoked") and revoked.revoked_at is not None
            assert session.keys.revoke(key.id).revoked_at == revoked.revoked_at, "revoking again changes nothing"
            with pytest.raises(AuthenticationError) as refused:
                limited.system_one(state="I was charged twice", questions=QUESTIONS)
            assert (refused.value.status, refused.value.code) == (401, "revoked_key")
        assert next(k for k in session.keys.list().keys if k.id == key.id).status == "revoked"


def test_a_key_past_its_expiry_is_refused_and_listed_as_expired(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")

    async def scenario() -> tuple[CreatedKey, KeyList]:
        async with AsyncClient(access_token=token, base_url=stack.base_url) as session:
            key = remembered(await session.keys.create(name="python short", expires_at=datetime.now(timezone.utc) + timedelta(seconds=3)))
            async with AsyncClient(api_key=key.secret, base_url=stack.base_url) as short:
                await short.models.list()  # works until then
                await asyncio.sleep(max(0.0, (datetime.fromisoformat(key.expires_at or "") - datetime.now(timezone.utc)).total_seconds()) + 0.5)
                with pytest.raises(AuthenticationError) as refused:
                    await short.models.list()
                assert (refused.value.status, refused.value.code) == (401, "expired_key")
            return key, await session.keys.list()

    key, listed = asyncio.run(scenario())
    assert (key.scope, key.models) == (None, None)
    assert next(k for k in listed.keys if k.id == key.id).status == "expired"


def test_what_the_service_refuses_to_create_or_revoke(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    with Client(access_token=token, base_url=stack.base_url) as session:
        attempts: list[tuple[Callable[[], CreatedKey], str]] = [
            (lambda: session.keys.create(name="past", expires_at=datetime.now(timezone.utc) - timedelta(minutes=1)), r"expires_at must be in the future"),
            (lambda: session.keys.create(name="day", expires_at="2030-01-01"), r"expires_at must be an RFC 3339 date-time"),
            (lambda: session.keys.create(name="none", models=[]), r"at least one model"),
            (lambda: session.keys.create(name="   "), r"name must not be blank"),
        ]
        for attempt, says in attempts:
            with pytest.raises(UnprocessableEntityError, match=says) as refused:
                attempt()
            assert (refused.value.status, refused.value.code) == (422, "invalid_request")
        with pytest.raises(NotFoundError) as unknown:
            session.keys.revoke(KEY_ID)
        assert unknown.value.status == 404
    # An API key in the access token's place is refused by the service.
    with Client(access_token=stack.api_key, base_url=stack.base_url) as confused:
        with pytest.raises(AuthenticationError) as wrong:
            confused.keys.list()
    assert (wrong.value.status, wrong.value.code) == (401, "wrong_credential_kind")
