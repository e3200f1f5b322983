"""Every error class the real service can be made to answer on demand."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from decision_service import (
    APIError,
    Batch,
    InputRecord,
    AuthenticationError,
    Client,
    ConflictError,
    GoneError,
    NotFoundError,
    RateLimitError,
    UnprocessableEntityError,
    choice,
    noul,
)

from .conftest import Stack, remember_upload, require

UNKNOWN_BATCH = "00000000-0000-4000-8000-000000000000"
RECORD: InputRecord = {"custom_id": "a", "body": {"state": "I was charged twice", "questions": {"q": noul("Money?")}}}


def test_401_a_wrong_key_is_an_authentication_error_with_code_message_and_request_id(stack: Stack) -> None:
    with pytest.raises(AuthenticationError) as caught:
        Client(api_key="svc_0000000000000000.wrong", base_url=stack.base_url).models.list()
    err = caught.value
    assert isinstance(err, APIError)
    assert (err.status, err.code) == (401, "invalid_credentials")
    assert err.message
    assert err.request_id is not None and err.request_id.startswith("req_")
    assert err.request_id in str(err)


def test_404_an_unknown_batch_and_another_accounts_batch_are_the_same_not_found(client: Client, stack: Stack) -> None:
    mine = client.batches.create(input_bytes=1)
    other = Client(api_key=require(stack.other_api_key, "SVC_TEST_OTHER_API_KEY"), base_url=stack.base_url)
    attempts: list[Callable[[], Batch]] = [lambda: client.batches.retrieve(UNKNOWN_BATCH), lambda: other.batches.retrieve(mine.id)]
    for attempt in attempts:
        with pytest.raises(NotFoundError) as caught:
            attempt()
        assert (caught.value.status, caught.value.code, caught.value.message) == (404, "not_found", "no batch with this id in this account")


def test_409_submit_before_upload_and_results_before_the_end_are_conflicts(client: Client) -> None:
    batch = client.batches.create(input_bytes=1)
    with pytest.raises(ConflictError) as caught:
        client.batches.submit(batch.id)
    assert (caught.value.status, caught.value.code) == (409, "upload_incomplete")
    with pytest.raises(ConflictError) as results:
        list(client.batches.results(batch.id))
    assert results.value.code == "batch_not_finished"


def test_410_results_after_their_retention_are_gone(client: Client, stack: Stack) -> None:
    expired = require(stack.expired_batch_id, "SVC_TEST_EXPIRED_BATCH_ID")
    with pytest.raises(GoneError) as caught:
        list(client.batches.results(expired))
    assert (caught.value.status, caught.value.code) == (410, "results_expired")


def test_422_an_invalid_body_names_the_problem(client: Client) -> None:
    with pytest.raises(UnprocessableEntityError) as caught:
        client.system_one(state="s", questions={"q": choice(["only"])})
    assert (caught.value.status, caught.value.code) == (422, "invalid_request")
    assert "at least 2 options" in caught.value.message


def test_429_an_account_limit_is_a_rate_limit_error_with_its_wait_and_batch_quotas_too(stack: Stack) -> None:
    limited = Client(api_key=require(stack.limited_api_key, "SVC_TEST_LIMITED_API_KEY"), base_url=stack.base_url, max_retries=0)
    with pytest.raises(RateLimitError) as caught:
        limited.system_one(state="s", questions={"q": noul("?")})
    assert (caught.value.status, caught.value.code) == (429, "rate_limited")
    assert caught.value.retry_after is not None and 0 < caught.value.retry_after <= 1
    limited.batches.create(input_bytes=1)
    with pytest.raises(RateLimitError) as quota:
        limited.batches.create(input_bytes=1)
    assert (quota.value.code, quota.value.retry_after) == ("active_batch_limit", 60)


def test_other_statuses_are_a_plain_api_error_a_second_upload_412(client: Client) -> None:
    data = (json.dumps(RECORD) + "\n").encode()
    batch = client.batches.create(input_bytes=len(data))
    assert batch.upload is not None
    remember_upload(batch.upload.url)
    client.batches.upload(batch, data)
    with pytest.raises(APIError) as caught:
        client.batches.upload(batch, data)
    assert type(caught.value) is APIError
    assert (caught.value.status, caught.value.code) == (412, "already_uploaded")
