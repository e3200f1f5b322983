"""
client.trainings and the access token it takes: what goes on the wire (offline, against the named
recording fake), the refusals made before any request, and one training end to end on the real
stack, through to a decision with the trained model and its retirement.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from decision_service import (
    TRAINING_STATUSES,
    TRAINING_TERMINAL_STATUSES,
    AsyncClient,
    AuthenticationError,
    Client,
    ConfigurationError,
    EvaluationReport,
    InputError,
    LabelIssue,
    NotFoundError,
    RetiredModel,
    Training,
    TrainingExample,
    noul,
    saved_access_token,
)

from .conftest import Stack, remember_upload, require
from .fakes import FakeServiceRecording

TOKEN = "eyJ.user-access-token.sig"
TRAINING_ID = "0b6c6f3e-4a53-4c1e-9d7e-5a4f1f3b2c10"
MODEL_ID = "ft:svc-shared:0b6c6f3e4a534c1e9d7e5a4f1f3b2c10"
LIMITS = {
    "file_bytes": 26214400,
    "examples": 10000,
    "examples_per_outcome": 10,
    "custom_id_characters": 64,
    "lifetime_seconds": 86400,
    "upload_validity_seconds": 3600,
    "data_retention_seconds": 2592000,
    "active_trainings": 3,
    "stored_trainings": 20,
    "acceptance": {"margin": 0.02, "max_ece": 0.1, "ece_bins": 10, "image_margin": 0.1, "confidence": 0.95, "folds": 5, "resamples": 1000, "ceiling": 0.98},
}


def training(status: str = "queued", **changes: Any) -> dict[str, Any]:
    """A training as the service answers it."""
    body: dict[str, Any] = {
        "id": TRAINING_ID,
        "object": "training",
        "status": status,
        "idempotency_key": "triage-v1",
        "metadata": None,
        "base_model": "svc-shared",
        "base_release": None,
        "model": None,
        "created_at": "2026-11-22T10:00:00.000Z",
        "input_bytes": None,
        "submitted_at": None,
        "started_at": None,
        "finished_at": None,
        "expires_at": "2026-11-23T10:00:00.000Z",
        "data_expires_at": None,
        "examples": {"total": 0, "held_out": 0},
        "error": None,
        "progress": None,
        "evaluation": None,
        "limits": LIMITS,
    }
    return {**body, **changes}


FIGURES = {"items": 12, "primary": 1, "primary_metric": "auroc", "accuracy": 1, "log_loss": 0.05, "ece": 0.04, "brier": 0.01}
BINS = [{"lower": 0, "upper": 0.1, "count": 6, "mean_confidence": 0.03, "accuracy": 0}, {"lower": 0.1, "upper": 0.2, "count": 0, "mean_confidence": None, "accuracy": None}]
QUESTION: dict[str, Any] = {
    "question": "q",
    "type": "noul",
    "outcomes": [True, False],
    "held_out_counts": [6, 6],
    "candidate": FIGURES,
    "zero_shot": {**FIGURES, "primary": 0.61, "added": "a newer service's field"},
    "reliability_candidate": BINS,
    "reliability_zero_shot": BINS,
    "passed": True,
    "reason": None,
}

REPORT = {
    "object": "training.report",
    "training": TRAINING_ID,
    "model": MODEL_ID,
    "base_release": "svc-base-1",
    "decision": "accepted",
    "acceptance": {"margin": 0.02, "max_ece": 0.1, "ece_bins": 10, "image_margin": 0.1, "confidence": 0.95, "folds": 5, "resamples": 1000, "ceiling": 0.98},
    "examples": {"training": 36, "held_out": 12},
    "method": {"kind": "hidden_state_head", "features": 896, "regularisation": [0.1, 1, 10]},
    "questions": [QUESTION],
    "evaluated_at": "2026-11-22T10:00:15.000Z",
    "training_ms": 15234,
}


def label_issue(rank: int) -> dict[str, Any]:
    """A label issue as GET /v1/trainings/{id}/label_issues lists it: the report's own issues have no `rank`."""
    return {
        "custom_id": f"e{rank}",
        "line": rank + 1,
        "question": "q",
        "given": True,
        "preferred": False,
        "given_probability": 0.1 * rank,
        "preferred_probability": 1 - 0.1 * rank,
        "rank": rank,
    }


def example(custom_id: str, animal: bool, model: str | None = None) -> TrainingExample:
    body: Any = {"state": f"The {'goat' if animal else 'tram'} {custom_id}.", "questions": {"q": noul("Group A?")}}
    if model is not None:
        body["model"] = model
    return {"custom_id": custom_id, "body": body, "labels": {"q": animal}}


# Offline: the recording fake.


def test_create_sends_the_training_then_the_file_to_its_signed_address_without_credentials_then_submits() -> None:
    fake = FakeServiceRecording()
    upload = {"url": f"{fake.url}/upload/trainings/{TRAINING_ID}/examples.jsonl?X-Amz-Signature=abc", "method": "PUT", "headers": {"if-none-match": "*", "content-type": "application/jsonl"}, "expires_at": "2026-11-22T11:00:00.000Z"}
    fake.answers = [
        (201, training("uploading", upload=upload)),
        (200, {"key": f"trainings/{TRAINING_ID}/examples.jsonl", "size": 1, "etag": "e"}),
        (200, training("queued", submitted_at="2026-11-22T10:00:01.000Z", input_bytes=1, base_release="svc-base-1")),
    ]
    with fake, Client(api_key="svc_key", access_token=TOKEN, base_url=fake.url) as client:
        queued = client.trainings.create(file=[example("a", True), example("b", False, model="other-base")], model="svc-shared", idempotency_key="triage-v1")
    create, put, submit = fake.seen
    # The create declares the file's size: the one the PUT then sends.
    assert (create.method, create.path, create.json()) == ("POST", "/v1/trainings", {"idempotency_key": "triage-v1", "input_bytes": len(put.body), "model": "svc-shared"})
    assert create.headers["authorization"] == f"Bearer {TOKEN}"
    assert (put.method, put.path) == ("PUT", f"/upload/trainings/{TRAINING_ID}/examples.jsonl?X-Amz-Signature=abc")
    assert "authorization" not in put.headers
    assert (put.headers["if-none-match"], put.headers["content-type"]) == ("*", "application/jsonl")
    lines = [json.loads(line) for line in put.body.decode().splitlines()]
    # An example naming no model gets the training's base; one that names one is sent as it is.
    assert [(line["custom_id"], line["body"]["model"], line["labels"]) for line in lines] == [("a", "svc-shared", {"q": True}), ("b", "other-base", {"q": False})]
    assert (submit.method, submit.path, submit.body) == ("POST", f"/v1/trainings/{TRAINING_ID}/submit", b"{}")
    assert submit.headers["authorization"] == f"Bearer {TOKEN}"
    assert isinstance(queued, Training)
    assert (queued.status, queued.base_release, queued.is_terminal, queued.request_id) == ("queued", "svc-base-1", False, "req_fake3")
    assert queued.upload is None and queued.limits.acceptance.margin == 0.02


def test_create_resumes_a_training_whose_file_has_arrived_and_sends_a_file_as_it_is(tmp_path: Path) -> None:
    file = tmp_path / "examples.jsonl"
    file.write_bytes(b'{"custom_id": "a", "body": {}, "labels": {}}\n')
    fake = FakeServiceRecording((200, training("uploading")), (200, training("queued")))
    with fake, Client(access_token=TOKEN, base_url=fake.url) as client:
        assert client.trainings.create(file=file).status == "queued"
    create, submit = fake.seen  # no upload destination: nothing is sent to storage again
    sent = create.json()
    # The base is the one the file names: the shared alias, as its first line names none.
    assert sent["model"] == "svc-shared" and sent["idempotency_key"].startswith("sdk-")
    assert sent["input_bytes"] == file.stat().st_size
    assert submit.path == f"/v1/trainings/{TRAINING_ID}/submit"


def test_the_base_is_the_one_the_examples_name_and_a_different_model_is_refused_before_sending(tmp_path: Path) -> None:
    upload = {"url": "", "method": "PUT", "headers": {}, "expires_at": "2026-11-22T11:00:00.000Z"}
    fake = FakeServiceRecording()
    upload["url"] = f"{fake.url}/upload"
    fake.answers = [(201, training("uploading", upload=upload)), (200, {"key": "k", "size": 1, "etag": "e"}), (200, training())] * 2
    file = tmp_path / "examples.jsonl"
    file.write_text(json.dumps({"custom_id": "a", "body": {"model": "base-2", "state": "s", "questions": {}}, "labels": {}}) + "\n")
    with fake, Client(access_token=TOKEN, base_url=fake.url, default_model="client-default") as client:
        client.trainings.create(file=file)
        client.trainings.create(file=[example("a", True), example("b", False)])
        with pytest.raises(InputError, match="the examples name the base model 'base-2' \\(line 1\\), not 'svc-shared'"):
            client.trainings.create(file=file, model="svc-shared")
    assert [s.json()["model"] for s in fake.seen if s.path == "/v1/trainings"] == ["base-2", "client-default"]
    assert [s.json()["input_bytes"] for s in fake.seen if s.path == "/v1/trainings"] == [len(s.body) for s in fake.seen if s.method == "PUT"]
    # Examples that name no model get the client's default model, as batch records do.
    assert [json.loads(line)["body"]["model"] for line in fake.seen[4].body.decode().splitlines()] == ["client-default"] * 2
    assert fake.requests == 6


def test_retrieve_cancel_report_and_retire_take_the_access_token_and_evaluation_the_api_key() -> None:
    ready = training("ready", model=MODEL_ID, finished_at="2026-11-22T10:00:16.000Z")
    fake = FakeServiceRecording(
        (200, ready),
        (200, ready),
        (200, REPORT),
        (200, {"id": MODEL_ID, "object": "model", "retired": True}),
        (200, REPORT),
    )
    with fake, Client(api_key="svc_key", access_token=TOKEN, base_url=fake.url) as client:
        assert client.trainings.retrieve(TRAINING_ID).model == MODEL_ID
        assert client.trainings.cancel(TRAINING_ID).status == "ready"
        report = client.trainings.report(TRAINING_ID)
        retired = client.models.retire(MODEL_ID)
        assert client.models.evaluation(MODEL_ID) == report
    assert [(s.method, s.path, s.headers["authorization"]) for s in fake.seen] == [
        ("GET", f"/v1/trainings/{TRAINING_ID}", f"Bearer {TOKEN}"),
        ("POST", f"/v1/trainings/{TRAINING_ID}/cancel", f"Bearer {TOKEN}"),
        ("GET", f"/v1/trainings/{TRAINING_ID}/report", f"Bearer {TOKEN}"),
        ("POST", "/v1/models/ft%3Asvc-shared%3A0b6c6f3e4a534c1e9d7e5a4f1f3b2c10/retire", f"Bearer {TOKEN}"),
        ("GET", "/v1/models/ft%3Asvc-shared%3A0b6c6f3e4a534c1e9d7e5a4f1f3b2c10/evaluation", "Bearer svc_key"),
    ]
    assert fake.seen[1].body == fake.seen[3].body == b"{}"
    assert isinstance(retired, RetiredModel) and (retired.id, retired.object, retired.retired) == (MODEL_ID, "model", True)
    assert isinstance(report, EvaluationReport)
    question = report.questions[0]
    assert (report.decision, report.method.features, report.training_ms) == ("accepted", 896, 15234.0)
    assert question.outcomes == [True, False] and all(type(o) is bool for o in question.outcomes)
    assert (question.candidate.primary, question.zero_shot.primary, question.reliability_candidate[1].accuracy) == (1.0, 0.61, None)


def test_list_pages_newest_first_with_limit_and_after() -> None:
    ids = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(3)]
    fake = FakeServiceRecording(
        (200, {"object": "list", "data": [training(id=ids[0]), training(id=ids[1])], "has_more": True, "next_cursor": ids[1]}),
        (200, {"object": "list", "data": [training("ready", id=ids[2])], "has_more": False, "next_cursor": None}),
        (200, {"object": "list", "data": [], "has_more": False, "next_cursor": None}),
    )
    with fake, Client(access_token=TOKEN, base_url=fake.url) as client:
        page = client.trainings.list(limit=2)
        listed = [t.id for t in page.data]
        while page.has_more:
            assert page.next_cursor is not None
            page = client.trainings.list(limit=2, after=page.next_cursor)
            listed += [t.id for t in page.data]
        assert client.trainings.list().data == []
    assert listed == ids
    assert [s.path for s in fake.seen] == ["/v1/trainings?limit=2", f"/v1/trainings?limit=2&after={ids[1]}", "/v1/trainings?limit=20"]


def test_create_sends_metadata_and_list_a_status_and_both_clients_read_it_back() -> None:
    pairs = {"team": "support"}
    page = {"object": "list", "data": [training("ready", metadata=pairs)], "has_more": False, "next_cursor": None}
    fake = FakeServiceRecording()
    upload = {"url": f"{fake.url}/upload?X-Amz-Signature=abc", "method": "PUT", "headers": {"if-none-match": "*"}, "expires_at": "2026-11-22T11:00:00.000Z"}
    fake.answers = [(201, training("uploading", upload=upload, metadata=pairs)), (200, {"key": "k", "size": 1, "etag": "e"}), (200, training(metadata=pairs)), (200, page)]
    examples = [example(f"e{i}", i % 2 == 0) for i in range(20)]
    with fake, Client(access_token=TOKEN, base_url=fake.url) as client:
        assert client.trainings.create(file=examples, idempotency_key="triage-v1", metadata=pairs).metadata == pairs
        assert [t.metadata for t in client.trainings.list(status="ready")] == [pairs]
    assert fake.seen[0].json()["metadata"] == pairs
    assert fake.seen[-1].path == "/v1/trainings?limit=20&status=ready"

    async def scenario(url: str) -> None:
        async with AsyncClient(access_token=TOKEN, base_url=url) as aclient:
            assert (await aclient.trainings.list(status="ready")).data[0].metadata == pairs

    with FakeServiceRecording((200, page)) as fake:
        asyncio.run(scenario(fake.url))
        assert fake.seen[0].path == "/v1/trainings?limit=20&status=ready"


def test_iterating_a_list_gives_every_training_of_every_page_each_fetched_when_reached() -> None:
    ids = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(3)]
    pages = (
        (200, {"object": "list", "data": [training(id=ids[0]), training(id=ids[1])], "has_more": True, "next_cursor": ids[1]}),
        (200, {"object": "list", "data": [training("ready", id=ids[2])], "has_more": False, "next_cursor": None}),
    )
    with FakeServiceRecording(*pages) as fake, Client(access_token=TOKEN, base_url=fake.url) as client:
        assert [t.id for t in client.trainings.list(limit=2)] == ids
        assert [s.path for s in fake.seen] == ["/v1/trainings?limit=2", f"/v1/trainings?limit=2&after={ids[1]}"]
    with FakeServiceRecording(*pages) as fake, Client(access_token=TOKEN, base_url=fake.url) as client:
        # The first page as before; leaving the loop early fetches no further page.
        page = client.trainings.list(limit=2)
        assert (page.has_more, page.next_cursor, len(page.data)) == (True, ids[1], 2)
        for t in page:
            assert t.id == ids[0]
            break
        assert fake.requests == 1
        assert [len(p.data) for p in page.iter_pages()] == [2, 1]

    async def scenario(url: str) -> list[str]:
        async with AsyncClient(access_token=TOKEN, base_url=url) as aclient:
            first = await aclient.trainings.list(limit=2)
            assert first.has_more and len(first.data) == 2
            return [t.id async for t in aclient.trainings.list(limit=2)]

    with FakeServiceRecording(pages[0], *pages) as fake:
        assert asyncio.run(scenario(fake.url)) == ids
        assert [s.path for s in fake.seen] == ["/v1/trainings?limit=2"] * 2 + [f"/v1/trainings?limit=2&after={ids[1]}"]


def test_a_reports_label_audit_and_its_label_issues_page_by_page_in_the_same_order() -> None:
    issues = [label_issue(rank) for rank in (1, 2, 3)]
    audit = {"method": "confident_learning", "examples": 48, "suspected": 3, "issues": [{k: v for k, v in i.items() if k != "rank"} for i in issues], "has_more": False}
    pages = (
        (200, {"object": "list", "data": issues[:2], "has_more": True}),
        (200, {"object": "list", "data": issues[2:], "has_more": False}),
    )
    path = f"/v1/trainings/{TRAINING_ID}/label_issues"
    with FakeServiceRecording((200, {**REPORT, "label_audit": audit}), pages[0], *pages) as fake, Client(access_token=TOKEN, base_url=fake.url) as client:
        report = client.trainings.report(TRAINING_ID)
        assert report.label_audit is not None
        assert (report.label_audit.method, report.label_audit.examples, report.label_audit.suspected, report.label_audit.has_more) == ("confident_learning", 48, 3, False)
        first = report.label_audit.issues[0]
        assert isinstance(first, LabelIssue) and (first.custom_id, first.line, first.given, first.preferred, first.given_probability) == ("e1", 2, True, False, 0.1)
        page = client.trainings.label_issues(TRAINING_ID, limit=2)
        assert (page.object, page.has_more, page.next_cursor, [i.rank for i in page.data]) == ("list", True, 2, [1, 2])
        listed = list(client.trainings.label_issues(TRAINING_ID, limit=2))  # every page, the next one after the last rank
        assert [i.rank for i in listed] == [1, 2, 3]
        assert [i.model_dump(exclude={"rank"}) for i in listed] == [i.model_dump() for i in report.label_audit.issues]
    assert [(s.path, s.headers["authorization"]) for s in fake.seen] == [
        (f"/v1/trainings/{TRAINING_ID}/report", f"Bearer {TOKEN}"),
        (f"{path}?limit=2", f"Bearer {TOKEN}"),
        (f"{path}?limit=2", f"Bearer {TOKEN}"),
        (f"{path}?limit=2&after=2", f"Bearer {TOKEN}"),
    ]
    assert EvaluationReport.model_validate(REPORT).label_audit is None  # a report made before the audit

    async def scenario(url: str) -> list[int]:
        async with AsyncClient(access_token=TOKEN, base_url=url) as aclient:
            one = await aclient.trainings.label_issues(TRAINING_ID, limit=2, after=0)
            assert (one.has_more, one.next_cursor) == (True, 2)
            return [i.rank async for i in aclient.trainings.label_issues(TRAINING_ID, limit=2)]

    with FakeServiceRecording(pages[0], *pages) as fake:
        assert asyncio.run(scenario(fake.url)) == [1, 2, 3]
        assert [s.path for s in fake.seen] == [f"{path}?limit=2&after=0", f"{path}?limit=2", f"{path}?limit=2&after=2"]


def test_every_training_method_without_an_access_token_raises_before_any_request(tmp_path: Path) -> None:
    missing = r"no access token: trainings, retiring a model, usage, key management, image models and image decisions take a signed-in user's access token.*access_token=.*SVC_ACCESS_TOKEN"
    with FakeServiceRecording() as fake, Client(api_key="svc_key", base_url=fake.url) as client:
        for call in (
            # The file is not even read: the missing token is said first.
            lambda: client.trainings.create(file=tmp_path / "missing.jsonl"),
            lambda: client.trainings.retrieve(TRAINING_ID),
            lambda: client.trainings.list(),
            lambda: client.trainings.cancel(TRAINING_ID),
            lambda: client.trainings.report(TRAINING_ID),
            lambda: client.trainings.label_issues(TRAINING_ID),
            lambda: client.trainings.wait(TRAINING_ID),
            lambda: client.models.retire(MODEL_ID),
        ):
            with pytest.raises(ConfigurationError, match=missing):
                call()

        async def scenario() -> None:
            async with AsyncClient(api_key="svc_key", base_url=fake.url) as aclient:
                with pytest.raises(ConfigurationError, match=missing):
                    await aclient.trainings.create(file=[example("a", True)])
                with pytest.raises(ConfigurationError, match=missing):
                    await aclient.trainings.list()
                with pytest.raises(ConfigurationError, match=missing):
                    await aclient.trainings.label_issues(TRAINING_ID)
                with pytest.raises(ConfigurationError, match=missing):
                    await aclient.models.retire(MODEL_ID)

        asyncio.run(scenario())
    assert fake.requests == 0


def test_a_client_with_only_an_access_token_refuses_the_api_key_routes_before_any_request() -> None:
    with FakeServiceRecording() as fake, Client(access_token=TOKEN, base_url=fake.url) as client:
        for call in (
            lambda: client.models.list(),
            lambda: client.models.evaluation(MODEL_ID),
            lambda: client.system_one(state="s", questions={"q": noul("?")}),
            lambda: client.batches.create(input_bytes=1),
        ):
            with pytest.raises(ConfigurationError, match="no API key, which models, decisions and batches take: pass api_key= .* SVC_API_KEY"):
                call()
    assert fake.requests == 0


def test_the_access_token_comes_from_its_argument_else_svc_access_token(monkeypatch: pytest.MonkeyPatch) -> None:
    ready = training("ready")
    fake = FakeServiceRecording((200, ready), (200, ready), (200, ready))
    with fake:
        monkeypatch.setenv("SVC_ACCESS_TOKEN", "env-token")
        Client(base_url=fake.url).trainings.retrieve(TRAINING_ID)  # no API key needed for trainings alone
        Client(access_token="arg-token", base_url=fake.url).trainings.retrieve(TRAINING_ID)
        monkeypatch.setenv("SVC_ACCESS_TOKEN", "")  # empty is unset
        monkeypatch.setenv("SVC_API_KEY", "svc_env")
        with pytest.raises(ConfigurationError, match="no access token"):
            Client(base_url=fake.url).trainings.retrieve(TRAINING_ID)
        Client(access_token="arg-token", base_url=fake.url).trainings.retrieve(TRAINING_ID)
    assert [s.headers["authorization"] for s in fake.seen] == ["Bearer env-token", "Bearer arg-token", "Bearer arg-token"]
    monkeypatch.delenv("SVC_API_KEY")
    with pytest.raises(ConfigurationError, match=r"no API key: pass api_key= .* or set SVC_API_KEY .*access_token= or SVC_ACCESS_TOKEN"):
        Client(access_token="", base_url=fake.url)
    secret = "eyJ.secret-token-material-that-must-not-print"
    assert secret not in repr(Client(access_token=secret, base_url=fake.url))


def test_the_token_svc_login_saved_is_read_only_when_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saved = tmp_path / "config.json"
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    session = {"issuer": "https://idp.example.test", "client_id": "svc-cli", "access_token": "saved-token", "expires_at": later}
    saved.write_text(json.dumps({"base_url": "http://127.0.0.1:9", "session": session}))
    monkeypatch.setenv("SVC_CONFIG_PATH", str(saved))
    with pytest.raises(ConfigurationError, match="no API key"):
        Client(base_url="http://127.0.0.1:9")  # a client never reads the saved session by itself
    assert saved_access_token() == "saved-token"
    assert saved_access_token(saved) == "saved-token"
    earlier = (datetime.now(timezone.utc) - timedelta(minutes=1)).isoformat()
    saved.write_text(json.dumps({"session": {**session, "expires_at": earlier}}))
    with pytest.raises(ConfigurationError, match=r"expired at .*: sign in again with `svc login`") as expired:
        saved_access_token()
    saved.write_text(json.dumps({"api_key": "svc_saved"}))
    with pytest.raises(ConfigurationError, match="hold no signed-in session") as none:
        saved_access_token()
    saved.write_text("{not json")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        saved_access_token()
    with pytest.raises(ConfigurationError, match="no saved settings at .*: sign in with `svc login`"):
        saved_access_token(tmp_path / "absent.json")
    assert "saved-token" not in str(expired.value) + str(none.value)


def test_refuses_a_training_file_that_cannot_be_accepted_before_sending_anything(tmp_path: Path) -> None:
    client = Client(access_token=TOKEN, base_url="http://127.0.0.1:9")  # nothing listens: a send would fail differently
    with pytest.raises(InputError, match="no examples"):
        client.trainings.create(file=[])
    with pytest.raises(InputError, match="training file is empty"):
        client.trainings.create(file=b"")
    with pytest.raises(InputError, match="cannot read the training file"):
        client.trainings.create(file=tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="custom_id, body and labels"):
        client.trainings.create(file=[{"custom_id": "a", "body": {"state": "s", "questions": {}}}])  # type: ignore[typeddict-item]
    with pytest.raises(InputError, match="at most 10000"):
        client.trainings.create(file=[example(str(i), i % 2 == 0) for i in range(10_001)])
    with pytest.raises(InputError, match="at most 26214400 bytes"):
        client.trainings.create(file=b"x" * (25 * 1024 * 1024 + 1))


def test_a_training_is_terminal_in_exactly_the_contracts_terminal_states() -> None:
    for status in TRAINING_STATUSES:
        assert Training.model_validate(training(status)).is_terminal == (status in TRAINING_TERMINAL_STATUSES), status


def test_an_image_models_report_reads_its_head_its_other_outcome_and_its_unknown_detection() -> None:
    # An image training's report (test/image-models.test.ts trains one): one head over the answers and "other" (None, last).
    question = {**QUESTION, "type": "choice", "outcomes": ["circle", "square", None], "held_out_counts": [4, 4, 4]}
    report = EvaluationReport.model_validate(
        {
            **REPORT,
            "method": {"kind": "image_head", "features": 1280, "regularisation": [0.1, 1]},
            "questions": [question],
            "unknown": {"held_out_other": 4, "held_out_known": 8, "auroc": 0.97, "mean_other": 0.71, "mean_known": 0.08},
        }
    )
    assert (report.method.kind, report.questions[0].outcomes, report.acceptance.image_margin) == ("image_head", ["circle", "square", None], 0.1)
    assert report.unknown is not None and (report.unknown.auroc, report.unknown.held_out_other) == (0.97, 4)
    assert EvaluationReport.model_validate(REPORT).unknown is None


def test_the_async_client_creates_waits_and_retires() -> None:
    fake = FakeServiceRecording()
    data = b'{"custom_id": "a"}\n'
    headers = {"content-length": str(len(data)), "if-none-match": "*"}
    upload = {"url": f"{fake.url}/upload?X-Amz-Signature=abc", "method": "PUT", "headers": headers, "expires_at": "2026-11-22T11:00:00.000Z"}
    ready = training("ready", model=MODEL_ID)
    fake.answers = [
        (201, training("uploading", upload=upload, input_bytes=len(data))),
        (200, {"key": "k", "size": 1, "etag": "e"}),
        (200, training("queued")),
        (200, training("running")),
        (200, ready),
        (200, {"object": "list", "data": [ready], "has_more": False, "next_cursor": None}),
        (200, {"id": MODEL_ID, "object": "model", "retired": True}),
    ]

    async def scenario() -> None:
        async with AsyncClient(access_token=TOKEN, base_url=fake.url) as client:
            created = await client.trainings.create(file=data)
            seen: list[str] = []
            done = await client.trainings.wait(created.id, poll_interval=0.01, on_progress=lambda t: seen.append(t.status))
            assert (done.status, done.model, seen) == ("ready", MODEL_ID, ["running", "ready"])
            assert [t.id for t in (await client.trainings.list(limit=5, after=TRAINING_ID)).data] == [TRAINING_ID]
            assert (await client.models.retire(MODEL_ID)).retired is True

    with fake:
        asyncio.run(scenario())
    assert fake.seen[0].json()["input_bytes"] == len(data)
    assert fake.seen[1].body == data and "authorization" not in fake.seen[1].headers
    assert fake.seen[1].headers["content-length"] == str(len(data))
    assert fake.seen[5].path == f"/v1/trainings?limit=5&after={TRAINING_ID}"
    assert all(s.headers["authorization"] == f"Bearer {TOKEN}" for i, s in enumerate(fake.seen) if i != 1)


# On the real stack: one training, end to end.


def _questions_of(file: str) -> Any:
    """The task of a training file: the questions of its first line."""
    with open(file, encoding="utf-8") as lines:
        return json.loads(lines.readline())["body"]["questions"]


def test_a_training_through_the_sdk_becomes_ready_answers_decisions_with_its_model_and_is_retired(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    file = require(stack.training_file, "SVC_TEST_TRAINING_FILE")
    questions = _questions_of(file)
    sent: list[httpx.Request] = []
    send = httpx.Client.send

    def recording(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        sent.append(request)
        return send(self, request, **kwargs)

    monkeypatch.setattr(httpx.Client, "send", recording)
    with Client(api_key=stack.api_key, access_token=token, base_url=stack.base_url) as client:
        queued = client.trainings.create(file=file, idempotency_key=f"py-training-{time.time_ns()}")
        put = next(r for r in sent if r.method == "PUT")
        remember_upload(str(put.url))
        assert "authorization" not in put.headers and parse_qs(urlsplit(str(put.url)).query).get("X-Amz-Signature")
        assert (queued.status, queued.base_model, queued.input_bytes) == ("queued", "svc-shared", Path(file).stat().st_size)
        # The signed length, sent once as the upload's headers give it.
        assert put.headers.get_list("content-length") == [str(Path(file).stat().st_size)]
        assert queued.request_id is not None

        deadline = time.monotonic() + 150
        seen: list[str] = []

        def progress(t: Training) -> None:
            seen.append(t.status)
            assert time.monotonic() < deadline, f"the training is still {t.status} after 150 s: {t.progress}"

        done = client.trainings.wait(queued.id, poll_interval=0.5, on_progress=progress)
        assert done.status == "ready", done
        assert done.model is not None and done.model.startswith("ft:svc-shared:")
        assert done.evaluation is not None and done.evaluation.decision == "accepted"
        assert done.evaluation.questions[0].passed and done.examples.total > 0
        assert seen[-1] == "ready"
        assert client.trainings.cancel(done.id).status == "ready"  # a finished training is unchanged
        assert done.id in [t.id for t in client.trainings.list(limit=5).data]

        report = client.trainings.report(done.id)
        assert (report.training, report.model, report.decision) == (done.id, done.model, "accepted")
        assert report.questions[0].candidate.primary >= report.questions[0].zero_shot.primary + report.acceptance.margin
        # The label audit: every example's label checked, its first issues in the report, and all of
        # them page by page (one a page here) in the same order, ranked from 1.
        audit = report.label_audit
        assert audit is not None and audit.method == "confident_learning"
        assert audit.examples > 0 and len(audit.issues) <= audit.suspected
        assert audit.has_more == (audit.suspected > len(audit.issues))
        ranked = list(client.trainings.label_issues(done.id, limit=1))
        assert [i.rank for i in ranked] == list(range(1, audit.suspected + 1))
        assert [i.model_dump(exclude={"rank"}) for i in ranked[: len(audit.issues)]] == [i.model_dump() for i in audit.issues]
        listed = next(m for m in client.models.list().models if m.name == done.model)
        assert listed.evaluation is not None
        evaluation = client.models.evaluation(done.model)  # with the API key
        assert (evaluation.training, evaluation.model, evaluation.label_audit) == (done.id, done.model, audit)

        yes = client.system_one(model=done.model, state="A donkey was grazing beside the road.", questions=questions)
        no = client.system_one(model=done.model, state="A taxi was waiting beside the road.", questions=questions)
        assert yes.model == done.model
        assert yes.noul_answer("q").noul > 0.5 > no.noul_answer("q").noul

        retired = client.models.retire(done.model)
        assert (retired.id, retired.retired) == (done.model, True)
        with pytest.raises(NotFoundError):
            client.system_one(model=done.model, state="A cat.", questions=questions)
        with pytest.raises(NotFoundError):
            client.models.retire(done.model)


def test_the_training_routes_refuse_an_api_key_in_the_sdk_and_on_the_service(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    with Client(api_key=stack.api_key, base_url=stack.base_url) as keyed:
        with pytest.raises(ConfigurationError, match="no access token"):
            keyed.trainings.list()
    # An API key given where the access token goes: the service refuses it as the wrong kind.
    with Client(access_token=stack.api_key, base_url=stack.base_url) as mistaken:
        for call in (lambda: mistaken.trainings.list(), lambda: mistaken.models.retire("ft:svc-shared:0")):
            with pytest.raises(AuthenticationError) as refused:
                call()
            assert (refused.value.status, refused.value.code) == (401, "wrong_credential_kind")
    # And the token on an API-key route, the other way round.
    with Client(api_key=token, base_url=stack.base_url) as reversed_:
        with pytest.raises(AuthenticationError) as wrong:
            reversed_.models.list()
        assert wrong.value.code == "wrong_credential_kind"


def test_the_async_client_lists_and_reads_trainings_with_the_access_token(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")

    async def scenario() -> None:
        async with AsyncClient(access_token=token, base_url=stack.base_url) as client:
            page = await client.trainings.list(limit=1)
            assert page.object == "list" and len(page.data) <= 1
            with pytest.raises(NotFoundError) as unknown:
                await client.trainings.retrieve("00000000-0000-4000-8000-000000000000")
            assert unknown.value.code == "not_found"

    asyncio.run(scenario())
