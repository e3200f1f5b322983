"""The official Python client, typesafe-sdk 0.7.2, used unchanged against the real stack.

Run by test/compat.test.ts, which installs the client (python-client.ts) and passes the stack by
environment: COMPAT_BASE_URL, COMPAT_RELEASE_ID (the release behind svc-shared), COMPAT_API_KEY,
COMPAT_WRONG_KEY (well-formed, unknown), COMPAT_RPS_KEY (an account limited to one request per
second) and COMPAT_TOKENS_KEY (an account whose token quota refuses every decision).

Attempts are counted by httpx2 event hooks on the client's own connection: every call goes to the
real server and nothing on the wire is faked.
"""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx2
import pytest
from typesafe_sdk import (
    Choice,
    ChoiceAnswer,
    Noul,
    NoulAnswer,
    Score,
    ScoreAnswer,
    TypeSafeAuthenticationError,
    TypeSafeClient,
    TypeSafeError,
    TypeSafeNotFoundError,
    TypeSafeRateLimitError,
    TypeSafeUnprocessableEntityError,
)

BASE_URL = os.environ["COMPAT_BASE_URL"]
RELEASE_ID = os.environ["COMPAT_RELEASE_ID"]
SHARED_ALIAS = "svc-shared"
REQUEST_ID = "x-typesafe-request-id"
# Timers may fire a millisecond or two early against the wall clock.
TIMER_SLACK_S = 0.005

STATE = {"ticket": "The invoice was charged twice this month.", "customer": "ACME"}
TINY = {"q": Noul(instructions="Is this text about money?")}


@dataclass
class Attempt:
    retry_count: str | None
    sent_at: float
    answered_at: float
    status: int
    retry_after_ms: float | None


class Recorder:
    """Event hooks noting each attempt the client makes: what it sent and what came back."""

    def __init__(self) -> None:
        self.attempts: list[Attempt] = []
        self._sent: dict[int, float] = {}
        self._lock = threading.Lock()

    def on_request(self, request: httpx2.Request) -> None:
        self._sent[id(request)] = time.time()

    def on_response(self, response: httpx2.Response) -> None:
        retry_after_ms = response.headers.get("retry-after-ms")
        attempt = Attempt(
            retry_count=response.request.headers.get("x-typesafe-retry-count"),
            sent_at=self._sent.pop(id(response.request)),
            answered_at=time.time(),
            status=response.status_code,
            retry_after_ms=None if retry_after_ms is None else float(retry_after_ms),
        )
        with self._lock:
            self.attempts.append(attempt)

    def summary(self) -> list[tuple[str | None, int]]:
        return [(a.retry_count, a.status) for a in self.attempts]


def recording_client(key: str) -> tuple[TypeSafeClient, Recorder]:
    recorder = Recorder()
    http_client = httpx2.Client(event_hooks={"request": [recorder.on_request], "response": [recorder.on_response]})
    return TypeSafeClient(api_key=key, base_url=BASE_URL, timeout=10.0, http_client=http_client), recorder


def start_of_next_second() -> None:
    """Quota windows are UTC seconds: start two quick calls just after one begins, so they share it."""
    time.sleep(1 - time.time() % 1 + 0.02)


def test_typed_answers_from_the_release_behind_the_alias() -> None:
    client, recorder = recording_client(os.environ["COMPAT_API_KEY"])
    with client:
        result = client.system_one(
            state=STATE,
            model=SHARED_ALIAS,
            questions={
                "urgent": Noul(instructions="Does the customer report a problem with money?"),
                "topic": Choice(
                    instructions="What is the ticket about?",
                    criteria={"billing": "payments and invoices", "bug": None, "praise": "compliments"},
                ),
                "severity": Score(
                    instructions="How severe is it?",
                    criteria=["none", {"label": "some", "examples": ["slow page"]}, "severe"],
                ),
            },
        )
    assert result.model == RELEASE_ID
    assert result.request_id.startswith("req_")
    assert result.request_id == result.raw_http_response.headers[REQUEST_ID]
    assert recorder.summary() == [(None, 200)]

    urgent = result.nouls["urgent"]
    assert isinstance(urgent, NoulAnswer)
    assert 0 <= urgent.noul <= 1

    topic = result.choices["topic"]
    assert isinstance(topic, ChoiceAnswer)
    assert list(topic.probabilities) == ["billing", "bug", "praise"]
    assert topic.choice in topic.probabilities
    assert topic.probabilities[topic.choice] == max(topic.probabilities.values())
    assert 0 <= topic.confidence <= 1

    severity = result.scores["severity"]
    assert isinstance(severity, ScoreAnswer)
    assert severity.legend == {0: "none", 1: {"label": "some", "examples": ["slow page"]}, 2: "severe"}
    assert list(severity.probabilities) == [0, 1, 2]
    assert 0 <= severity.score <= 2
    assert 0 <= severity.confidence <= 1

    assert type(result.usage.input_tokens) is int
    assert type(result.usage.output_tokens) is int


def test_question_ids_and_options_keep_their_order_whatever_they_look_like() -> None:
    questions = {
        "b": Noul(instructions="Is this about money?"),
        "2": Noul(instructions="Is it urgent?"),
        "__proto__": Choice(criteria={"__proto__": None, "10": "ten", "x": None, "2": "two"}),
        "1": Noul(),
    }
    client, _ = recording_client(os.environ["COMPAT_API_KEY"])
    with client:
        result = client.system_one(state=STATE, model=SHARED_ALIAS, questions=questions)
    assert list(result.answers) == ["b", "2", "__proto__", "1"]
    assert list(result.choices["__proto__"].probabilities) == ["__proto__", "10", "x", "2"]
    assert set(result.nouls) == {"b", "2", "1"}


def test_models_list_the_release_behind_the_shared_alias() -> None:
    client, _ = recording_client(os.environ["COMPAT_API_KEY"])
    with client:
        listing = client.models.list()
    assert listing.request_id.startswith("req_")
    assert RELEASE_ID in [m.name for m in listing.models]
    # The client keeps name, description and release_date only; the aliases are in the raw body.
    raw = {m["name"]: m for m in listing.raw_http_response.json()["models"]}
    assert SHARED_ALIAS in raw[RELEASE_ID]["aliases"]


def test_wrong_key_is_an_authentication_error_not_retried() -> None:
    client, recorder = recording_client(os.environ["COMPAT_WRONG_KEY"])
    with client, pytest.raises(TypeSafeAuthenticationError) as caught:
        client.system_one(state=STATE, model=SHARED_ALIAS, questions=TINY)
    assert caught.value.status == 401
    assert caught.value.request_id.startswith("req_")
    assert caught.value.body["error"]["code"] == "invalid_credentials"
    assert recorder.summary() == [(None, 401)]


def test_unknown_model_is_a_not_found_error_not_retried() -> None:
    client, recorder = recording_client(os.environ["COMPAT_API_KEY"])
    with client, pytest.raises(TypeSafeNotFoundError) as caught:
        client.system_one(state=STATE, model="no-such-model", questions=TINY)
    assert caught.value.status == 404
    assert caught.value.request_id.startswith("req_")
    assert caught.value.body["error"]["code"] == "model_not_found"
    assert recorder.summary() == [(None, 404)]


def test_the_clients_own_check_stops_an_empty_score_before_it_is_sent() -> None:
    client, recorder = recording_client(os.environ["COMPAT_API_KEY"])
    with client, pytest.raises(TypeSafeError):
        client.system_one(state=STATE, model=SHARED_ALIAS, questions={"s": {"type": "score", "criteria": []}})
    assert recorder.attempts == []


@pytest.mark.parametrize(
    ("questions", "message"),
    [
        ({"c": Choice(instructions="Which?", criteria={"only": None})}, "questions.c.criteria: a choice needs at least 2 options"),
        # Score objects refuse a null level themselves; a dictionary question reaches the server.
        ({"s": {"type": "score", "instructions": "How much?", "criteria": ["low", None]}}, "questions.s.criteria.1"),
    ],
    ids=["a choice with one option", "a score level that is null"],
)
def test_invalid_question_the_client_lets_through_is_unprocessable(questions: dict, message: str) -> None:
    client, recorder = recording_client(os.environ["COMPAT_API_KEY"])
    with client, pytest.raises(TypeSafeUnprocessableEntityError) as caught:
        client.system_one(state=STATE, model=SHARED_ALIAS, questions=questions)
    assert caught.value.status == 422
    assert caught.value.request_id.startswith("req_")
    assert message in str(caught.value)
    assert recorder.summary() == [(None, 422)]


def test_of_two_quick_calls_under_one_request_per_second_one_is_retried_after_the_delay() -> None:
    client, recorder = recording_client(os.environ["COMPAT_RPS_KEY"])
    with client, ThreadPoolExecutor(2) as pool:
        start_of_next_second()
        calls = [pool.submit(client.system_one, state=STATE, model=SHARED_ALIAS, questions=TINY) for _ in range(2)]
        results = [call.result() for call in calls]
    assert [r.model for r in results] == [RELEASE_ID, RELEASE_ID]
    assert sorted(recorder.summary(), key=str) == sorted([(None, 200), (None, 429), ("1", 200)], key=str)
    refused = next(a for a in recorder.attempts if a.status == 429)
    retried = next(a for a in recorder.attempts if a.retry_count == "1")
    assert refused.retry_after_ms is not None and refused.retry_after_ms > 0
    assert retried.sent_at >= refused.answered_at + refused.retry_after_ms / 1000 - TIMER_SLACK_S


def test_a_token_quota_that_always_refuses_ends_in_a_rate_limit_error_after_two_retries() -> None:
    client, recorder = recording_client(os.environ["COMPAT_TOKENS_KEY"])
    with client, pytest.raises(TypeSafeRateLimitError) as caught:
        client.system_one(state=STATE, model=SHARED_ALIAS, questions=TINY)
    assert caught.value.status == 429
    assert caught.value.request_id.startswith("req_")
    assert caught.value.retry_after_ms is not None
    assert recorder.summary() == [(None, 429), ("1", 429), ("2", 429)]
    for before, after in zip(recorder.attempts, recorder.attempts[1:]):
        assert before.retry_after_ms is not None
        assert after.sent_at >= before.answered_at + before.retry_after_ms / 1000 - TIMER_SLACK_S
