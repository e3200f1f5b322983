"""client.system_one and client.models.list against the real service."""

from __future__ import annotations

import json

import pytest

from decision_service import (
    SHARED_ALIAS,
    ChoiceAnswer,
    Client,
    DecisionResponse,
    NotFoundError,
    NoulAnswer,
    ScoreAnswer,
    Usage,
    choice,
    noul,
    score,
)

from .conftest import Stack
from .fakes import FakeServiceCountingConnections


def test_models_list_names_the_shared_alias_and_the_request_id(client: Client, stack: Stack) -> None:
    listing = client.models.list()
    shared = [m for m in listing.models if SHARED_ALIAS in m.aliases]
    assert len(shared) == 1
    assert isinstance(shared[0].name, str) and isinstance(shared[0].release_date, str)
    if stack.release_id is not None:
        assert shared[0].name == stack.release_id
    assert listing.request_id is not None and listing.request_id.startswith("req_")


def test_answers_each_question_with_the_typed_answer_of_its_type(client: Client, stack: Stack) -> None:
    reply = client.system_one(
        state={"ticket": "My card was charged twice for one order"},
        questions={
            "refund": noul("Does the customer want money back?"),
            "topic": choice(["billing", "shipping", "bug"], "What is the ticket about?"),
            "severity": score(["low", "medium", "high"], "How severe is it?"),
        },
    )
    assert isinstance(reply, DecisionResponse)
    assert list(reply.answers) == ["refund", "topic", "severity"]
    refund = reply.noul_answer("refund")
    assert isinstance(refund, NoulAnswer) and 0 <= refund.noul <= 1
    topic = reply.choice_answer("topic")
    assert isinstance(topic, ChoiceAnswer)
    assert topic.choice in ("billing", "shipping", "bug")
    assert list(topic.probabilities) == ["billing", "shipping", "bug"]
    assert sum(topic.probabilities.values()) == pytest.approx(1, abs=1e-3)
    severity = reply.score_answer("severity")
    assert isinstance(severity, ScoreAnswer) and 0 <= severity.score <= 2
    assert severity.legend == {"0": "low", "1": "medium", "2": "high"}
    assert isinstance(reply.usage, Usage) and reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    if stack.release_id is not None:
        assert reply.model == stack.release_id
    assert reply.request_id is not None and reply.request_id.startswith("req_")
    with pytest.raises(TypeError, match="'refund' has a noul answer, not a ScoreAnswer"):
        reply.score_answer("refund")


def test_sends_the_default_model_when_the_call_names_none_and_the_calls_model_over_it(stack: Stack) -> None:
    with Client(api_key=stack.api_key, base_url=stack.base_url, default_model="no-such-model") as other:
        with pytest.raises(NotFoundError) as err:
            other.system_one(state="s", questions={"q": noul("?")})
        assert err.value.code == "model_not_found"
        assert other.system_one(state="s", questions={"q": noul("?")}, model=SHARED_ALIAS).answers["q"].type == "noul"


def test_question_helpers_build_the_wire_questions_in_the_order_given() -> None:
    assert noul() == {"type": "noul"}
    assert noul("Urgent?", {"true": "needs an answer today"}) == {"type": "noul", "instructions": "Urgent?", "criteria": {"true": "needs an answer today"}}
    names = choice(["10", "2", "b", "a"])
    assert list(names["criteria"]) == ["10", "2", "b", "a"]
    assert choice({"x": "an x", "y": None}, "Which?") == {"type": "choice", "criteria": {"x": "an x", "y": None}, "instructions": "Which?"}
    assert score([{"level": "low"}, "high"]) == {"type": "score", "criteria": [{"level": "low"}, "high"]}
    with pytest.raises(TypeError):
        choice("ab")


def test_sends_questions_and_options_in_the_order_they_are_written() -> None:
    with FakeServiceCountingConnections(0) as fake:
        with Client(api_key="svc_fake", base_url=fake.url, default_model="fake-model") as c:
            c.system_one(state={"b": 1, "a": 2}, questions={"z": choice(["10", "2"]), "a": noul()})
        sent = json.loads(fake.bodies[0])
    assert list(sent) == ["model", "state", "questions"]
    assert sent["model"] == "fake-model"
    assert list(sent["state"]) == ["b", "a"]
    assert list(sent["questions"]) == ["z", "a"]
    assert list(sent["questions"]["z"]["criteria"]) == ["10", "2"]
