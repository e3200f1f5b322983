"""
How the service's answers are read into the SDK's models: fields a newer service adds are ignored,
maps keep the order they have on the wire, the request id stays out of the value, and a body of
another shape is an APIError that says where. The named fake gives bodies the real stack never does.
"""

from __future__ import annotations

from typing import Any

import pytest

from decision_service import APIError, Client, ResultFailure, ResultSuccess, noul

from .fakes import DECISION, FakeServiceAnsweringBodies

QUESTIONS = {"q": noul("?")}

NEWER = {
    "model": "fake-release",
    "answers": {
        "topic": {"type": "choice", "choice": "bug", "probabilities": {"bug": 0.7, "billing": 0.3}, "confidence": 0.8, "added": [1]},
        "severity": {"type": "score", "score": 1, "confidence": 0.5, "legend": {"0": "low", "1": {"level": [1, None]}}, "probabilities": {"0": 0.5, "1": 0.5}},
        "refund": {"type": "noul", "noul": 1, "option_mass": 0.9},
    },
    "usage": {"input_tokens": 3, "output_tokens": 1, "added": {"cached": 2}},
    "added": "a field this client does not know",
}
"""A decision as a newer service might answer it: fields this client does not know, at every level."""


def test_reads_a_newer_services_answer_ignoring_what_it_adds_and_keeping_the_wire_order() -> None:
    with FakeServiceAnsweringBodies(NEWER, NEWER) as fake, Client(api_key="svc_fake", base_url=fake.url) as client:
        first = client.system_one(state="s", questions=QUESTIONS)
        again = client.system_one(state="s", questions=QUESTIONS)
    assert list(first.answers) == ["topic", "severity", "refund"]
    assert list(first.choice_answer("topic").probabilities) == ["bug", "billing"]
    assert first.score_answer("severity").legend == {"0": "low", "1": {"level": [1, None]}}
    refund = first.noul_answer("refund")
    assert (refund.noul, type(refund.noul), refund.option_mass) == (1.0, float, 0.9)
    dumped = first.model_dump()
    assert list(dumped) == ["model", "answers", "usage"]
    assert list(dumped["answers"]) == ["topic", "severity", "refund"]
    assert "added" not in dumped["usage"] and "added" not in dumped["answers"]["topic"]
    assert (first.request_id, again.request_id) == ("req_fake1", "req_fake2")
    assert first == again and "req_fake1" not in repr(first)
    with pytest.raises(ValueError):
        setattr(first, "model", "another")


def test_reads_each_result_record_as_a_success_or_a_failure() -> None:
    page = {
        "object": "list",
        "data": [
            {"custom_id": "r1", "response": DECISION},
            {"custom_id": "r2", "error": {"status": 404, "code": "model_not_found", "message": "no such model"}, "added": True},
        ],
        "next_cursor": None,
    }
    with FakeServiceAnsweringBodies(page) as fake, Client(api_key="svc_fake", base_url=fake.url) as client:
        success, failure = client.batches.results("b")
    assert isinstance(success, ResultSuccess) and success.response.noul_answer("q").noul == 0.5
    assert success.response.request_id is None  # a record is not a response of its own
    assert isinstance(failure, ResultFailure) and (failure.error.status, failure.error.code) == (404, "model_not_found")


def _decision(**changes: Any) -> dict[str, Any]:
    return {**DECISION, **changes}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (_decision(answers={"q": {"type": "rank"}}), "DecisionResponse.answers.q: Input tag 'rank' found using 'type' does not match"),
        (_decision(usage={"input_tokens": "1", "output_tokens": 1}), "DecisionResponse.usage.input_tokens: Input should be a valid integer"),
        (_decision(usage={"input_tokens": 1, "output_tokens": 1.0}), "DecisionResponse.usage.output_tokens: Input should be a valid integer"),
        (_decision(answers={"q": {"type": "noul", "noul": True}}), "DecisionResponse.answers.q.noul.noul: Input should be a valid number"),
        ({"answers": {}, "usage": DECISION["usage"]}, "DecisionResponse.model: Field required"),
        (["not", "an", "object"], "DecisionResponse: Input should be a valid dictionary"),
    ],
)
def test_a_body_of_another_shape_is_an_api_error_that_says_where(body: object, problem: str) -> None:
    with FakeServiceAnsweringBodies(body) as fake, Client(api_key="svc_fake", base_url=fake.url) as client:
        with pytest.raises(APIError) as caught:
            client.system_one(state="s", questions=QUESTIONS)
    assert type(caught.value) is APIError
    assert (caught.value.status, caught.value.request_id) == (200, "req_fake1")
    assert caught.value.message.startswith("the service answered 200 with a body this client cannot read: ")
    assert problem in caught.value.message
