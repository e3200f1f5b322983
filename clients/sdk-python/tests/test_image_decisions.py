"""
client.image_credit, client.image_models and client.image_decisions (and system_one with images), sync
and async, against the real stack with a fresh account: no credit, no image models, and the refusals
an image decision gets before any model answers. A decision that a trained image model answers (its
unknown_probability, a 402 for too little credit, a 413) needs a training of its own
(test/image-models.test.ts trains one); here those answers come from the named recording fake, to
show what the client sends and how it reads them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from decision_service import (
    IMAGE_BASE_ALIAS,
    SHARED_ALIAS,
    APIError,
    AsyncClient,
    AuthenticationError,
    ChoiceAnswer,
    Client,
    ConfigurationError,
    CreditBalance,
    CreditPricing,
    DecisionResponse,
    ImageModelList,
    NotFoundError,
    PayloadTooLargeError,
    PaymentRequiredError,
    UnprocessableEntityError,
    choice,
)
from decision_service._errors import error_from_response

from .conftest import Stack, require
from .fakes import FakeServiceRecording

UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"
SHAPE = {"shape": choice(["circle", "square", "triangle"], "Which shape is drawn?")}
IMAGES = [{"asset_id": UNKNOWN_ID}]


def envelope(status: int, code: str, message: str = "m") -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status}}


def test_a_fresh_accounts_credit_is_zero_with_the_published_price_whichever_credential_reads_it(client: Client, stack: Stack) -> None:
    credit = client.image_credit.retrieve()
    assert isinstance(credit, CreditBalance)
    assert (credit.object, credit.balance_micro_usd, credit.reserved_micro_usd) == ("credit_balance", 0, 0)
    assert credit.pricing == CreditPricing(currency="USD", micro_usd_per_billable_token=2)
    assert credit.request_id is not None and credit.request_id.startswith("req_")
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")

    async def from_the_session() -> CreditBalance:
        async with AsyncClient(access_token=token, base_url=stack.base_url) as session:
            return await session.image_credit.retrieve()

    assert asyncio.run(from_the_session()) == credit


def test_a_fresh_accounts_image_models_are_an_empty_list_read_with_the_access_token(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    with Client(api_key=stack.api_key, access_token=token, base_url=stack.base_url) as both:
        listing = both.image_models.list()
    assert isinstance(listing, ImageModelList)
    assert (listing.object, listing.data) == ("list", [])
    assert listing.request_id is not None

    async def scenario() -> ImageModelList:
        async with AsyncClient(access_token=token, base_url=stack.base_url) as session:
            return await session.image_models.list()

    assert asyncio.run(scenario()) == listing


def test_the_session_routes_take_the_access_token_only_and_a_client_without_one_sends_nothing(stack: Stack) -> None:
    with FakeServiceRecording() as fake, Client(api_key="svc_key", base_url=fake.url) as key_only:
        calls: list[Callable[[], object]] = [lambda: key_only.image_models.list(), lambda: key_only.image_decisions.create(state="", questions=SHAPE, images=IMAGES)]
        for call in calls:
            with pytest.raises(ConfigurationError, match=r"no access token: .*image models and image decisions take a signed-in user's access token"):
                call()
        assert fake.seen == []
    # The service itself refuses an API key there.
    with Client(api_key=stack.api_key, access_token=stack.api_key, base_url=stack.base_url) as confused:
        refused_calls: list[Callable[[], object]] = [
            lambda: confused.image_models.list(),
            lambda: confused.image_decisions.create(state="", questions=SHAPE, images=IMAGES),
        ]
        for call in refused_calls:
            with pytest.raises(AuthenticationError) as refused:
                call()
            assert (refused.value.status, refused.value.code) == (401, "wrong_credential_kind")


def test_an_image_decision_naming_an_unknown_model_is_not_found_from_the_session_and_with_the_api_key(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    with Client(api_key=stack.api_key, access_token=token, base_url=stack.base_url) as client:
        attempts: list[Callable[[], DecisionResponse]] = [
            lambda: client.image_decisions.create(model="ft:svc-image:no-such-model", state="", questions=SHAPE, images=IMAGES),
            lambda: client.system_one(model="ft:svc-image:no-such-model", state="", questions=SHAPE, images=IMAGES),
        ]
        for attempt in attempts:
            with pytest.raises(NotFoundError) as missing:
                attempt()
            assert (missing.value.status, missing.value.code) == (404, "model_not_found")
            assert missing.value.request_id is not None

    async def scenario() -> NotFoundError:
        async with AsyncClient(access_token=token, base_url=stack.base_url) as session:
            with pytest.raises(NotFoundError) as missing:
                await session.image_decisions.create(model="no-such-model", state="", questions=SHAPE, images=IMAGES)
            return missing.value

    assert asyncio.run(scenario()).code == "model_not_found"


@pytest.mark.parametrize(("model", "says"), [(SHARED_ALIAS, "reads text"), (IMAGE_BASE_ALIAS, "image backbone")])
def test_an_image_decision_naming_a_model_that_answers_no_image_question_is_the_not_found_of_an_unknown_model(stack: Stack, model: str, says: str) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    with Client(api_key=stack.api_key, access_token=token, base_url=stack.base_url) as client:
        attempts: list[Callable[[], DecisionResponse]] = [
            lambda: client.image_decisions.create(model=model, state="", questions=SHAPE, images=IMAGES),
            lambda: client.system_one(model=model, state="", questions=SHAPE, images=IMAGES),
        ]
        for attempt in attempts:
            with pytest.raises(NotFoundError) as refused:
                attempt()
            assert (refused.value.status, refused.value.code) == (404, "model_not_found")
            assert says in refused.value.message


def test_an_image_decision_sends_the_body_of_system_one_with_the_access_token_and_reads_the_unknown_mass() -> None:
    answer = {
        "model": "ft:svc-image:abc",
        "answers": {"shape": {"type": "choice", "choice": "square", "probabilities": {"circle": 0.1, "square": 0.8, "triangle": 0.1}, "confidence": 0.4, "unknown_probability": 0.3}},
        "usage": {"input_tokens": 64, "output_tokens": 1, "billable_input_tokens": 90},
    }
    with FakeServiceRecording((200, answer)) as fake:
        with Client(api_key="svc_the-key", access_token="the-token", base_url=fake.url, default_model="ft:svc-image:abc") as client:
            reply = client.image_decisions.create(state="", questions=SHAPE, images=[{"asset_id": UNKNOWN_ID}])
    (sent,) = fake.seen
    assert (sent.method, sent.path, sent.headers["authorization"]) == ("POST", "/v1/image-decisions", "Bearer the-token")
    body = sent.json()
    assert list(body) == ["model", "state", "questions", "images"]
    assert body["model"] == "ft:svc-image:abc"
    assert list(body["questions"]["shape"]["criteria"]) == ["circle", "square", "triangle"]
    assert body["images"] == [{"asset_id": UNKNOWN_ID}]
    shape = reply.choice_answer("shape")
    assert (shape.choice, shape.unknown_probability, reply.usage.billable_input_tokens) == ("square", 0.3, 90)
    # A text decision's choice has none.
    assert ChoiceAnswer.model_validate({"type": "choice", "choice": "a", "probabilities": {"a": 1.0}, "confidence": 1.0}).unknown_probability is None


def test_too_little_credit_and_too_large_an_image_are_typed_and_never_retried() -> None:
    credit = envelope(402, "insufficient_credit", "this image decision may cost up to 8400 micro-USD; the account's prepaid credit is 0 micro-USD")
    with FakeServiceRecording((402, credit), (413, envelope(413, "context_too_large"))) as fake:
        with Client(access_token="the-token", base_url=fake.url, max_retries=5) as client:
            with pytest.raises(PaymentRequiredError) as poor:
                client.image_decisions.create(model="m", state="", questions=SHAPE, images=IMAGES)
            with pytest.raises(PayloadTooLargeError) as large:
                client.image_decisions.create(model="m", state="", questions=SHAPE, images=IMAGES)
        assert len(fake.seen) == 2
    assert (poor.value.status, poor.value.code) == (402, "insufficient_credit")
    assert "prepaid credit is 0" in poor.value.message
    assert (large.value.status, large.value.code) == (413, "context_too_large")


def test_the_new_statuses_have_their_classes_and_the_others_keep_theirs() -> None:
    for status, code, cls in (
        (402, "insufficient_credit", PaymentRequiredError),
        (413, "context_too_large", PayloadTooLargeError),
        (413, "payload_too_large", PayloadTooLargeError),
        (422, "task_mismatch", UnprocessableEntityError),
        (404, "not_found", NotFoundError),
    ):
        err = error_from_response(httpx.Response(status, json=envelope(status, code)))
        assert type(err) is cls and isinstance(err, APIError), code
        assert err.code == code
    assert type(error_from_response(httpx.Response(412, json=envelope(412, "already_uploaded")))) is APIError
