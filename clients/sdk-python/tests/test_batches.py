"""
client.batches against the real service and its bulk worker, sync and async; and what an upload
checks and sends on the wire, offline, against the recording fake.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from decision_service import (
    AsyncClient,
    Batch,
    Client,
    ConflictError,
    DecisionRequest,
    InputError,
    InputRecord,
    ResultFailure,
    ResultSuccess,
    UnprocessableEntityError,
    noul,
)

from .conftest import Stack, remember_upload, require
from .fakes import FakeServiceRecording

BATCH_ID = "5d0f3a52-3c1e-4b7a-9f0e-2a6b7c8d9e01"


def record(custom_id: str, model: str | None = None) -> InputRecord:
    body: DecisionRequest = {"state": f"ticket {custom_id}: I was charged twice", "questions": {"money": noul("Is it about money?")}}
    if model is not None:
        body["model"] = model
    return {"custom_id": custom_id, "body": body}


def jsonl(*records: InputRecord) -> bytes:
    """Records as the bytes of a JSONL file, sent as they are: what a batch is created for, by size."""
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def recorded_sends(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """Every request the sync client sends from now on, as httpx sends it."""
    sent: list[httpx.Request] = []
    send = httpx.Client.send

    def recording(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        sent.append(request)
        return send(self, request, **kwargs)

    monkeypatch.setattr(httpx.Client, "send", recording)
    return sent


def test_create_upload_a_file_submit_retrieve_wait_and_read_results(client: Client, stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = recorded_sends(monkeypatch)
    file = tmp_path / "input.jsonl"
    data = jsonl(record("t-1"), record("t-2"))
    file.write_bytes(data)
    key = f"py-path-{uuid.uuid4()}"
    batch = client.batches.create(input_bytes=len(data), idempotency_key=key)
    assert batch.upload is not None
    remember_upload(batch.upload.url)
    assert (batch.object, batch.status, batch.idempotency_key, batch.input_bytes) == ("batch", "uploading", key, len(data))
    assert batch.upload.headers["content-length"] == str(len(data))
    assert batch.request_id is not None
    assert json.loads(sent[0].content) == {"idempotency_key": key, "input_bytes": len(data)}
    assert client.batches.create(input_bytes=len(data), idempotency_key=key).id == batch.id
    # The same key with another size names another input: a conflict, not this batch.
    with pytest.raises(ConflictError) as conflict:
        client.batches.create(input_bytes=len(data) + 1, idempotency_key=key)
    assert (conflict.value.status, conflict.value.code) == (409, "idempotency_conflict")

    uploaded = client.batches.upload(batch, file)
    assert uploaded.size == file.stat().st_size
    put = next(r for r in sent if r.method == "PUT")
    assert "authorization" not in put.headers
    assert put.headers["if-none-match"] == "*"
    assert put.headers.get_list("content-length") == [str(len(data))]
    # Once the input is there, the same key gives the same batch and no new destination.
    assert client.batches.create(input_bytes=len(data), idempotency_key=key).upload is None

    assert client.batches.submit(batch.id).status == "queued"
    assert client.batches.submit(batch.id).status != "uploading"
    assert client.batches.retrieve(batch.id).id == batch.id
    done = client.batches.wait(batch.id, poll_interval=0.2)
    assert (done.status, done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == ("completed", 2, 2, 0)
    records = list(client.batches.results(batch.id))
    assert [r.custom_id for r in records] == ["t-1", "t-2"]
    for r in records:
        assert isinstance(r, ResultSuccess), r
        assert r.response.noul_answer("money").type == "noul"
        if stack.release_id is not None:
            assert r.response.model == stack.release_id


def test_run_records_to_the_terminal_batch_and_its_results_with_progress_and_the_clients_model(stack: Stack) -> None:
    seen: list[str] = []
    with Client(api_key=stack.api_key, base_url=stack.base_url, default_model="no-such-model") as runner:
        run = runner.batches.run(
            [record("ok", model="svc-shared"), record("defaulted")],
            poll_interval=0.2,
            on_progress=lambda b: seen.append(b.status),
        )
        # Results are read page by page as they are iterated, so while the client is open.
        results = {r.custom_id: r for r in run.results}
    assert run.batch.status == "completed"
    assert seen[-1] == "completed"
    assert isinstance(results["ok"], ResultSuccess)
    failed = results["defaulted"]
    assert isinstance(failed, ResultFailure)
    assert failed.error.status == 404


def test_run_sends_bytes_as_they_are_and_a_file_the_worker_refuses_ends_a_failed_batch(client: Client) -> None:
    run = client.batches.run(b'{"custom_id": "a", "body": {}}\nnot json\n', poll_interval=0.2)
    assert run.batch.status == "failed"
    assert run.batch.error is not None and run.batch.error.line == 2
    assert list(run.results) == []


def test_run_resumes_the_batch_of_its_idempotency_key(client: Client) -> None:
    key = f"py-resume-{uuid.uuid4()}"
    first = client.batches.run([record("r-1")], idempotency_key=key, poll_interval=0.2)
    again = client.batches.run([record("r-1")], idempotency_key=key, poll_interval=0.2)
    assert again.batch.id == first.batch.id
    assert [r.custom_id for r in again.results] == ["r-1"]


def test_cancel_a_batch_that_has_not_finished_and_a_finished_one_is_unchanged(client: Client) -> None:
    batch = client.batches.create(input_bytes=1)
    cancelled = client.batches.cancel(batch.id)
    assert cancelled.status == "cancelled" and cancelled.finished_at is not None
    assert client.batches.cancel(batch.id).status == "cancelled"


def test_list_the_accounts_batches_newest_first_page_by_page(stack: Stack) -> None:
    other = Client(api_key=require(stack.other_api_key, "SVC_TEST_OTHER_API_KEY"), base_url=stack.base_url)
    made = [other.batches.create(input_bytes=1).id for _ in range(3)]
    first = other.batches.list(limit=2)
    assert first.object == "list" and first.has_more and first.next_cursor is not None
    rest = other.batches.list(limit=2, after=first.next_cursor)
    listed = [b.id for b in first.data + rest.data]
    assert listed[:3] == list(reversed(made))
    assert all(isinstance(b, Batch) for b in first.data)
    # Iterated, the list is every batch of every page, newest first.
    assert [b.id for b in other.batches.list(limit=2)][:3] == list(reversed(made))


def test_results_iterate_every_page_from_any_cursor(client: Client, stack: Stack) -> None:
    paged = require(stack.paged_batch_id, "SVC_TEST_PAGED_BATCH_ID")
    stream = client.batches.results(paged)
    pages = list(stream.pages())
    assert len(pages) == -(-stack.paged_records // 20) and all(len(p.data) <= 20 for p in pages)
    records = list(client.batches.results(paged))
    assert [r.custom_id for r in records] == [f"r{i}" for i in range(1, stack.paged_records + 1)]
    assert [r.custom_id for r in client.batches.results(paged, after=stack.paged_records - 2)] == [
        f"r{stack.paged_records - 1}",
        f"r{stack.paged_records}",
    ]


def test_refuses_input_that_cannot_be_accepted_before_sending_anything(tmp_path: Path) -> None:
    client = Client(api_key="svc_x", base_url="http://127.0.0.1:9")  # nothing listens: a send would fail differently
    with pytest.raises(InputError, match="no records"):
        client.batches.run([])
    with pytest.raises(InputError, match="empty"):
        client.batches.run(b"")
    with pytest.raises(InputError, match="cannot read the batch file"):
        client.batches.run(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="at most 10000"):
        client.batches.run([record(str(i)) for i in range(10_001)])
    with pytest.raises(InputError, match="at most 26214400 bytes"):
        client.batches.run(b"x" * (25 * 1024 * 1024 + 1))
    for size in (0, -1, 25 * 1024 * 1024 + 1, True):
        with pytest.raises(InputError, match="input_bytes must be an integer from 1 to 26214400"):
            client.batches.create(input_bytes=size)


def batch(status: str = "uploading", **changes: Any) -> dict[str, Any]:
    """A batch as the service answers it."""
    body: dict[str, Any] = {
        "id": BATCH_ID,
        "object": "batch",
        "status": status,
        "idempotency_key": "tickets-2026-11-22",
        "metadata": None,
        "request_counts": {"total": 0, "completed": 0, "failed": 0},
        "created_at": "2026-11-22T10:00:00.000Z",
        "input_bytes": None,
        "submitted_at": None,
        "started_at": None,
        "finished_at": None,
        "expires_at": "2026-11-23T10:00:00.000Z",
        "results_expire_at": None,
        "error": None,
        "progress": None,
        "limits": {
            "file_bytes": 26214400,
            "records": 10000,
            "results_page": 20,
            "lifetime_seconds": 86400,
            "upload_validity_seconds": 3600,
            "results_retention_seconds": 2592000,
        },
    }
    return {**body, **changes}


def test_upload_sends_exactly_the_declared_length_once_and_refuses_another_before_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    data = jsonl(record("s-1"))
    fake = FakeServiceRecording()
    upload = {"url": f"{fake.url}/upload?X-Amz-Signature=abc", "method": "PUT", "headers": {"content-length": str(len(data)), "if-none-match": "*"}, "expires_at": "2026-11-22T11:00:00.000Z"}
    fake.answers = [(201, batch(upload=upload, input_bytes=len(data))), (200, {"key": "k", "size": len(data), "etag": "e"})]
    sent = recorded_sends(monkeypatch)
    with fake, Client(api_key="svc_key", base_url=fake.url) as client:
        created = client.batches.create(input_bytes=len(data))
        # Records are written with the client's model, so they are longer than the same records as a file.
        for other in (jsonl(record("s-10")), [record("s-1")]):
            with pytest.raises(InputError, match=f"^the input is \\d+ bytes, but this batch was created for {len(data)} bytes"):
                client.batches.upload(created, other)
        assert fake.requests == 1
        assert client.batches.upload(created, data).size == len(data)
    create, put = fake.seen
    assert create.json()["input_bytes"] == len(data) and create.json()["idempotency_key"].startswith("sdk-")
    assert (put.method, put.body, put.headers["content-length"]) == ("PUT", data, str(len(data)))
    # httpx keeps the header as the upload gives it rather than adding its own beside it.
    assert sent[-1].headers.get_list("content-length") == [str(len(data))]


def test_metadata_is_sent_on_create_and_run_and_read_back_and_list_sends_its_status() -> None:
    data = jsonl(record("m-1"))
    pairs = {"team": "support", "ticket": "OPS-12"}
    fake = FakeServiceRecording()
    upload = {"url": f"{fake.url}/upload?X-Amz-Signature=abc", "method": "PUT", "headers": {"content-length": str(len(data)), "if-none-match": "*"}, "expires_at": "2026-11-22T11:00:00.000Z"}
    done = batch("completed", metadata=pairs, input_bytes=len(data))
    page = {"object": "list", "data": [done], "has_more": False, "next_cursor": None}
    fake.answers = [
        (201, batch(metadata=pairs)),
        (201, batch(upload=upload, input_bytes=len(data), metadata=pairs)),
        (200, {"key": "k", "size": len(data), "etag": "e"}),
        (200, batch("queued", metadata=pairs, input_bytes=len(data))),
        (200, done),
        (200, page),
        (200, page),
    ]
    with fake, Client(api_key="svc_key", base_url=fake.url) as client:
        created = client.batches.create(input_bytes=len(data), metadata=pairs)
        assert created.metadata == pairs
        run = client.batches.run(data, metadata=pairs, poll_interval=0)
        assert run.batch.metadata == pairs
        listed = client.batches.list(status="completed")
        assert [b.metadata for b in listed.data] == [pairs]
        assert client.batches.list().data[0].id == BATCH_ID
    create, run_create = fake.seen[0], fake.seen[1]
    assert create.json() == {"idempotency_key": create.json()["idempotency_key"], "input_bytes": len(data), "metadata": pairs}
    assert run_create.json()["metadata"] == pairs
    assert [s.path for s in fake.seen[-2:]] == ["/v1/batches?limit=20&status=completed", "/v1/batches?limit=20"]
    # A batch created without metadata reads it as None, and none is sent.
    with FakeServiceRecording((201, batch())) as fake, Client(api_key="svc_key", base_url=fake.url) as client:
        assert client.batches.create(input_bytes=1).metadata is None
        assert "metadata" not in fake.seen[0].json()


def test_the_async_client_sends_metadata_and_a_list_status() -> None:
    pairs = {"team": "support"}
    page = {"object": "list", "data": [batch("running", metadata=pairs)], "has_more": False, "next_cursor": None}

    async def scenario(url: str) -> None:
        async with AsyncClient(api_key="svc_key", base_url=url) as client:
            assert (await client.batches.create(input_bytes=3, metadata=pairs)).metadata == pairs
            assert [b.metadata async for b in client.batches.list(status="running")] == [pairs]

    with FakeServiceRecording((201, batch(metadata=pairs)), (200, page)) as fake:
        asyncio.run(scenario(fake.url))
    assert fake.seen[0].json()["metadata"] == pairs
    assert fake.seen[1].path == "/v1/batches?limit=20&status=running"


def test_metadata_and_a_status_filter_on_the_service(client: Client) -> None:
    pairs = {"team": "support", "ticket": "OPS-12"}
    created = client.batches.create(input_bytes=1, metadata=pairs)
    assert created.metadata == pairs
    assert client.batches.retrieve(created.id).metadata == pairs
    assert client.batches.cancel(created.id).metadata == pairs
    cancelled = client.batches.list(status="cancelled", limit=100)
    assert all(b.status == "cancelled" for b in cancelled.data)
    assert created.id in [b.id for b in cancelled.data]
    assert created.id not in [b.id for b in client.batches.list(status="running", limit=100).data]
    assert client.batches.create(input_bytes=1).metadata is None
    with pytest.raises(UnprocessableEntityError):
        client.batches.create(input_bytes=1, metadata={f"k{i}": "v" for i in range(17)})
    with pytest.raises(UnprocessableEntityError):
        client.batches.list(status="finished")  # type: ignore[arg-type]


def test_the_async_client_runs_a_batch_and_iterates_its_results(stack: Stack) -> None:
    async def scenario() -> None:
        async with AsyncClient(api_key=stack.api_key, base_url=stack.base_url) as client:
            assert len((await client.models.list()).models) > 0
            reply = await client.system_one(state="I was charged twice", questions={"money": noul("Is it about money?")})
            assert 0 <= reply.noul_answer("money").noul <= 1
            seen: list[str] = []
            run = await client.batches.run([record("a-1"), record("a-2")], poll_interval=0.2, on_progress=lambda b: seen.append(b.status))
            assert run.batch.status == "completed" and seen[-1] == "completed"
            assert [r.custom_id async for r in run.results] == ["a-1", "a-2"]
            assert [r.custom_id for r in await client.batches.results(run.batch.id, after=1).to_list()] == ["a-2"]
            assert (await client.batches.retrieve(run.batch.id)).status == "completed"
            created = await client.batches.create(input_bytes=1)
            assert (await client.batches.cancel(created.id)).status == "cancelled"
            assert created.id in [b.id for b in (await client.batches.list(limit=5)).data]

    asyncio.run(scenario())
