"""
`client.batches`: durable bulk jobs. A batch is created, its JSONL input is PUT to the signed storage
address the create answer names (never with the API key), it is submitted, a worker runs it, and its
results are read page by page once it has finished. `run` does all of that:

    run = client.batches.run("tickets.jsonl", on_progress=lambda b: print(b.status, b.request_counts))
    for record in run.results:
        if isinstance(record, ResultSuccess):
            print(record.custom_id, record.response.answers)
        else:
            print(record.custom_id, record.error.code, record.error.message)

Creating again with the same idempotency key returns the same batch, so a job interrupted on the
caller's side resumes where it was when `run` is called again with the same `idempotency_key`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from urllib.parse import quote

from .._constants import BATCH_LIST_PAGE_DEFAULT
from .._errors import InputError
from .._input import BatchInput, encode_input
from .._models import AsyncPages, Batch, BatchList, ResultRecord, ResultsPage, UploadResult
from .._transport import AsyncTransport, Call, SyncTransport, encode_json, read

DEFAULT_POLL_INTERVAL = 2.0
"""Seconds between polls of `wait` and `run`."""

ProgressCallback = Callable[[Batch], object]


class ResultStream:
    """A finished batch's results in input order, fetched one page at a time as they are iterated."""

    def __init__(self, fetch_page: Callable[[int], ResultsPage], after: int = 0) -> None:
        self._fetch_page = fetch_page
        self._after = after

    def pages(self) -> Iterator[ResultsPage]:
        after: int | None = self._after
        while after is not None:
            page = self._fetch_page(after)
            yield page
            after = page.next_cursor

    def __iter__(self) -> Iterator[ResultRecord]:
        for page in self.pages():
            yield from page.data


class AsyncResultStream:
    """A finished batch's results in input order, fetched one page at a time as they are iterated."""

    def __init__(self, fetch_page: Callable[[int], Awaitable[ResultsPage]], after: int = 0) -> None:
        self._fetch_page = fetch_page
        self._after = after

    async def pages(self) -> AsyncIterator[ResultsPage]:
        after: int | None = self._after
        while after is not None:
            page = await self._fetch_page(after)
            yield page
            after = page.next_cursor

    async def __aiter__(self) -> AsyncIterator[ResultRecord]:
        async for page in self.pages():
            for record in page.data:
                yield record

    async def to_list(self) -> list[ResultRecord]:
        return [record async for record in self]


@dataclass(frozen=True)
class BatchRun:
    batch: Batch
    """The batch in its terminal state: completed, failed, cancelled or expired."""
    results: ResultStream
    """Its results, in input order (none for a batch that failed validation)."""


@dataclass(frozen=True)
class AsyncBatchRun:
    batch: Batch
    results: AsyncResultStream


def _path(batch_id: str) -> str:
    if not isinstance(batch_id, str) or not batch_id:
        raise InputError("a batch id is a non-empty string")
    return f"/v1/batches/{quote(batch_id, safe='')}"


def _create_call(idempotency_key: str | None) -> Call:
    key = idempotency_key if idempotency_key is not None else f"sdk-{uuid.uuid4()}"
    return Call("POST", path="/v1/batches", body=encode_json({"idempotency_key": key}))


def _upload_call(batch: Batch, data: bytes) -> Call:
    if batch.upload is None:
        raise InputError(
            "this batch has no upload destination: its input has already arrived (submit it), "
            "or create it again with the same idempotency key"
        )
    return Call("PUT", url=batch.upload.url, headers=batch.upload.headers, body=data, json_body=False)


def _list_call(limit: int | None, after: str | None) -> Call:
    return Call("GET", path="/v1/batches", query={"limit": BATCH_LIST_PAGE_DEFAULT if limit is None else limit, "after": after})


class Batches:
    def __init__(self, transport: SyncTransport, default_model: Callable[[], str]) -> None:
        self._transport = transport
        self._default_model = default_model

    def create(self, *, idempotency_key: str | None = None, timeout: float | None = None) -> Batch:
        """
        Creates a batch (or returns the one this idempotency key already made), with the signed
        `upload` destination while no input has arrived.

            batch = client.batches.create(idempotency_key="tickets-2026-11-22")
        """
        return read(Batch, self._transport.request(_create_call(idempotency_key), timeout=timeout))

    def upload(self, batch: Batch, source: BatchInput, *, timeout: float | None = None) -> UploadResult:
        """
        Uploads the input of a created batch (records, the path of a JSONL file, or its bytes) to its
        signed `upload.url`, with exactly its `upload.headers` and without the API key.

            client.batches.upload(batch, [{"custom_id": "t-1", "body": {"state": "...", "questions": {"q": noul("?")}}}])
        """
        data = encode_input(source, self._default_model())
        return read(UploadResult, self._transport.request(_upload_call(batch, data), timeout=timeout))

    def submit(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """Queues an uploaded batch for the worker; repeating it changes nothing."""
        return read(Batch, self._transport.request(Call("POST", path=f"{_path(batch_id)}/submit", body=b"{}"), timeout=timeout))

    def retrieve(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """The batch's status, timestamps, record counts and progress."""
        return read(Batch, self._transport.request(Call("GET", path=_path(batch_id)), timeout=timeout))

    def cancel(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """Cancels a batch that has not finished (committed results stay); a finished one is returned unchanged."""
        return read(Batch, self._transport.request(Call("POST", path=f"{_path(batch_id)}/cancel", body=b"{}"), timeout=timeout))

    def list(self, *, limit: int | None = None, after: str | None = None, timeout: float | None = None) -> BatchList:
        """
        A page of the account's batches, newest first (`limit` of them, after `after`). Iterating it
        gives every batch from it on, each later page fetched when the loop reaches it.

            for batch in client.batches.list():
                print(batch.id, batch.status)
            page = client.batches.list(limit=50)    # page.data, page.has_more, page.next_cursor
        """
        page = read(BatchList, self._transport.request(_list_call(limit, after), timeout=timeout))
        # Private state may change on a frozen model; type checkers see only the frozen dataclass.
        page._fetch = lambda cursor: self.list(limit=limit, after=cursor, timeout=timeout)  # type: ignore[misc]
        return page

    def results(self, batch_id: str, *, after: int = 0, timeout: float | None = None) -> ResultStream:
        """
        A finished batch's results in input order, every page, fetched as they are iterated.

            for record in client.batches.results(batch_id):
                print(record.custom_id)
        """
        path = f"{_path(batch_id)}/results"

        def page(cursor: int) -> ResultsPage:
            return read(ResultsPage, self._transport.request(Call("GET", path=path, query={"after": cursor}), timeout=timeout))

        return ResultStream(page, after)

    def wait(self, batch_id: str, *, poll_interval: float = DEFAULT_POLL_INTERVAL, on_progress: ProgressCallback | None = None) -> Batch:
        """Polls a batch until it is terminal and returns it, calling `on_progress` with the batch after every poll."""
        while True:
            batch = self.retrieve(batch_id)
            if on_progress is not None:
                on_progress(batch)
            if batch.is_terminal:
                return batch
            time.sleep(poll_interval)

    def run(
        self,
        source: BatchInput,
        *,
        idempotency_key: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_progress: ProgressCallback | None = None,
    ) -> BatchRun:
        """
        Creates a batch, uploads the input, submits it, waits until it is terminal and returns the
        final batch and its results. The same `idempotency_key` resumes the same batch.

            run = client.batches.run("tickets.jsonl", on_progress=lambda b: print(b.status))
            if run.batch.status == "completed":
                for record in run.results: ...
        """
        # Encoded first, so input that cannot be sent is refused before a batch exists.
        data = encode_input(source, self._default_model())
        created = self.create(idempotency_key=idempotency_key)
        # No upload destination: this key's batch already has its input (a resumed run).
        if created.upload is not None:
            self.upload(created, data)
        self.submit(created.id)
        batch = self.wait(created.id, poll_interval=poll_interval, on_progress=on_progress)
        return BatchRun(batch, self.results(batch.id))


class AsyncBatches:
    def __init__(self, transport: AsyncTransport, default_model: Callable[[], str]) -> None:
        self._transport = transport
        self._default_model = default_model

    async def create(self, *, idempotency_key: str | None = None, timeout: float | None = None) -> Batch:
        """Creates a batch (or returns this idempotency key's); see `Batches.create`."""
        return read(Batch, await self._transport.request(_create_call(idempotency_key), timeout=timeout))

    async def upload(self, batch: Batch, source: BatchInput, *, timeout: float | None = None) -> UploadResult:
        """Uploads the input of a created batch; see `Batches.upload`."""
        data = encode_input(source, self._default_model())
        return read(UploadResult, await self._transport.request(_upload_call(batch, data), timeout=timeout))

    async def submit(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """Queues an uploaded batch for the worker; repeating it changes nothing."""
        return read(Batch, await self._transport.request(Call("POST", path=f"{_path(batch_id)}/submit", body=b"{}"), timeout=timeout))

    async def retrieve(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """The batch's status, timestamps, record counts and progress."""
        return read(Batch, await self._transport.request(Call("GET", path=_path(batch_id)), timeout=timeout))

    async def cancel(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """Cancels a batch that has not finished; a finished one is returned unchanged."""
        return read(Batch, await self._transport.request(Call("POST", path=f"{_path(batch_id)}/cancel", body=b"{}"), timeout=timeout))

    def list(self, *, limit: int | None = None, after: str | None = None, timeout: float | None = None) -> AsyncPages[Batch, BatchList]:
        """
        The account's batches, newest first: awaited, one page (`limit` of them, after `after`);
        iterated with `async for`, every batch of every page, each fetched when the loop reaches it.

            async for batch in client.batches.list():
                print(batch.id, batch.status)
        """

        async def page(cursor: str | None) -> BatchList:
            return read(BatchList, await self._transport.request(_list_call(limit, cursor), timeout=timeout))

        return AsyncPages(page, after)

    def results(self, batch_id: str, *, after: int = 0, timeout: float | None = None) -> AsyncResultStream:
        """
        A finished batch's results in input order, every page, fetched as they are iterated.

            async for record in client.batches.results(batch_id):
                print(record.custom_id)
        """
        path = f"{_path(batch_id)}/results"

        async def page(cursor: int) -> ResultsPage:
            return read(ResultsPage, await self._transport.request(Call("GET", path=path, query={"after": cursor}), timeout=timeout))

        return AsyncResultStream(page, after)

    async def wait(self, batch_id: str, *, poll_interval: float = DEFAULT_POLL_INTERVAL, on_progress: ProgressCallback | None = None) -> Batch:
        """Polls a batch until it is terminal and returns it."""
        while True:
            batch = await self.retrieve(batch_id)
            if on_progress is not None:
                on_progress(batch)
            if batch.is_terminal:
                return batch
            await asyncio.sleep(poll_interval)

    async def run(
        self,
        source: BatchInput,
        *,
        idempotency_key: str | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_progress: ProgressCallback | None = None,
    ) -> AsyncBatchRun:
        """Creates, uploads, submits and waits for a batch; see `Batches.run`."""
        data = encode_input(source, self._default_model())
        created = await self.create(idempotency_key=idempotency_key)
        if created.upload is not None:
            await self.upload(created, data)
        await self.submit(created.id)
        batch = await self.wait(created.id, poll_interval=poll_interval, on_progress=on_progress)
        return AsyncBatchRun(batch, self.results(batch.id))
