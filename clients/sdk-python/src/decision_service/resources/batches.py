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
The lifecycle is the one every job has (`_jobs.py`); what is a batch's own is its input and results.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from .._constants import BATCH_LIST_PAGE_DEFAULT, BULK_FILE_BYTES
from .._errors import InputError
from .._input import BatchInput, encode_input
from .._models import AsyncPages, Batch, BatchList, BatchStatus, ResultRecord, ResultsPage, UploadResult
from .._transport import AsyncTransport, SyncTransport
from ._jobs import DEFAULT_POLL_INTERVAL, AsyncJobs, JobKind, Jobs

ProgressCallback = Callable[[Batch], object]

_KIND = JobKind("batch", "/v1/batches", "api_key", Batch, BatchList, BATCH_LIST_PAGE_DEFAULT)


def _checked_size(input_bytes: int) -> int:
    """`input_bytes` when a batch can have it; InputError, before anything is sent, otherwise."""
    if isinstance(input_bytes, bool) or not isinstance(input_bytes, int) or not 1 <= input_bytes <= BULK_FILE_BYTES:
        raise InputError(f"input_bytes must be an integer from 1 to {BULK_FILE_BYTES} (25 MiB): the size of the input that will be uploaded")
    return input_bytes


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


class Batches:
    def __init__(self, transport: SyncTransport, default_model: Callable[[], str]) -> None:
        self._jobs = Jobs(transport, _KIND)
        self._default_model = default_model

    def create(
        self,
        *,
        input_bytes: int,
        idempotency_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Batch:
        """
        Creates a batch for an input of `input_bytes` bytes (or returns the one this idempotency key
        already made), with the signed `upload` destination while no input has arrived: it takes
        exactly that many bytes. InputError, before anything is sent, for a size no batch can have;
        ConflictError (`idempotency_conflict`) for the same key with another size. `metadata`, your
        own string pairs (at most 16; keys 1-64 characters, values up to 512), is returned on the
        batch everywhere it is; the service checks it (UnprocessableEntityError naming what is wrong).

            data = Path("tickets.jsonl").read_bytes()
            batch = client.batches.create(input_bytes=len(data), idempotency_key="tickets-2026-11-22", metadata={"team": "support"})
        """
        return self._jobs.create(idempotency_key, _checked_size(input_bytes), {"metadata": metadata}, timeout=timeout)

    def upload(self, batch: Batch, source: BatchInput, *, timeout: float | None = None) -> UploadResult:
        """
        Uploads the input of a created batch (records, the path of a JSONL file, or its bytes) to its
        signed `upload.url`, with exactly its `upload.headers` and without the API key. InputError,
        before anything is sent, for input of another length than the batch was created for.

            client.batches.upload(batch, data)
        """
        return self._jobs.upload(batch, lambda: encode_input(source, self._default_model()), timeout=timeout)

    def submit(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """Queues an uploaded batch for the worker; repeating it changes nothing."""
        return self._jobs.submit(batch_id, timeout=timeout)

    def retrieve(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """The batch's status, timestamps, record counts and progress."""
        return self._jobs.retrieve(batch_id, timeout=timeout)

    def cancel(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """Cancels a batch that has not finished (committed results stay); a finished one is returned unchanged."""
        return self._jobs.cancel(batch_id, timeout=timeout)

    def list(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        status: BatchStatus | None = None,
        timeout: float | None = None,
    ) -> BatchList:
        """
        A page of the account's batches, newest first (`limit` of them, after `after`; only those in
        `status` when it is given). Iterating it gives every batch from it on, each later page
        fetched when the loop reaches it.

            for batch in client.batches.list():
                print(batch.id, batch.status)
            page = client.batches.list(limit=50)    # page.data, page.has_more, page.next_cursor
            running = client.batches.list(status="running")
        """
        return self._jobs.list(limit=limit, after=after, timeout=timeout, status=status)

    def results(self, batch_id: str, *, after: int = 0, timeout: float | None = None) -> ResultStream:
        """
        A finished batch's results in input order, every page, fetched as they are iterated.

            for record in client.batches.results(batch_id):
                print(record.custom_id)
        """
        path = _KIND.at(batch_id, "results")
        return ResultStream(lambda cursor: self._jobs.get(ResultsPage, path, query={"after": cursor}, timeout=timeout), after)

    def wait(self, batch_id: str, *, poll_interval: float = DEFAULT_POLL_INTERVAL, on_progress: ProgressCallback | None = None) -> Batch:
        """Polls a batch until it is terminal and returns it, calling `on_progress` with the batch after every poll."""
        return self._jobs.wait(batch_id, poll_interval=poll_interval, on_progress=on_progress)

    def run(
        self,
        source: BatchInput,
        *,
        idempotency_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_progress: ProgressCallback | None = None,
    ) -> BatchRun:
        """
        Creates a batch, uploads the input, submits it, waits until it is terminal and returns the
        final batch and its results. The same `idempotency_key` resumes the same batch; `metadata`
        is set on the batch at create (see `create`).

            run = client.batches.run("tickets.jsonl", metadata={"ticket": "OPS-12"}, on_progress=lambda b: print(b.status))
            if run.batch.status == "completed":
                for record in run.results: ...
        """
        submitted = self._jobs.start(lambda: ({"metadata": metadata}, encode_input(source, self._default_model())), idempotency_key=idempotency_key)
        batch = self._jobs.wait(submitted.id, poll_interval=poll_interval, on_progress=on_progress)
        return BatchRun(batch, self.results(batch.id))


class AsyncBatches:
    def __init__(self, transport: AsyncTransport, default_model: Callable[[], str]) -> None:
        self._jobs = AsyncJobs(transport, _KIND)
        self._default_model = default_model

    async def create(
        self,
        *,
        input_bytes: int,
        idempotency_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Batch:
        """Creates a batch for an input of `input_bytes` bytes (or returns this idempotency key's); see `Batches.create`."""
        return await self._jobs.create(idempotency_key, _checked_size(input_bytes), {"metadata": metadata}, timeout=timeout)

    async def upload(self, batch: Batch, source: BatchInput, *, timeout: float | None = None) -> UploadResult:
        """Uploads the input of a created batch; see `Batches.upload`."""
        return await self._jobs.upload(batch, lambda: encode_input(source, self._default_model()), timeout=timeout)

    async def submit(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """Queues an uploaded batch for the worker; repeating it changes nothing."""
        return await self._jobs.submit(batch_id, timeout=timeout)

    async def retrieve(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """The batch's status, timestamps, record counts and progress."""
        return await self._jobs.retrieve(batch_id, timeout=timeout)

    async def cancel(self, batch_id: str, *, timeout: float | None = None) -> Batch:
        """Cancels a batch that has not finished; a finished one is returned unchanged."""
        return await self._jobs.cancel(batch_id, timeout=timeout)

    def list(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        status: BatchStatus | None = None,
        timeout: float | None = None,
    ) -> AsyncPages[Batch, BatchList]:
        """
        The account's batches, newest first: awaited, one page (`limit` of them, after `after`; only
        those in `status` when it is given); iterated with `async for`, every batch of every page,
        each fetched when the loop reaches it.

            async for batch in client.batches.list(status="completed"):
                print(batch.id, batch.metadata)
        """
        return self._jobs.list(limit=limit, after=after, timeout=timeout, status=status)

    def results(self, batch_id: str, *, after: int = 0, timeout: float | None = None) -> AsyncResultStream:
        """
        A finished batch's results in input order, every page, fetched as they are iterated.

            async for record in client.batches.results(batch_id):
                print(record.custom_id)
        """
        path = _KIND.at(batch_id, "results")
        return AsyncResultStream(lambda cursor: self._jobs.get(ResultsPage, path, query={"after": cursor}, timeout=timeout), after)

    async def wait(self, batch_id: str, *, poll_interval: float = DEFAULT_POLL_INTERVAL, on_progress: ProgressCallback | None = None) -> Batch:
        """Polls a batch until it is terminal and returns it."""
        return await self._jobs.wait(batch_id, poll_interval=poll_interval, on_progress=on_progress)

    async def run(
        self,
        source: BatchInput,
        *,
        idempotency_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_progress: ProgressCallback | None = None,
    ) -> AsyncBatchRun:
        """Creates, uploads, submits and waits for a batch; see `Batches.run`."""
        submitted = await self._jobs.start(lambda: ({"metadata": metadata}, encode_input(source, self._default_model())), idempotency_key=idempotency_key)
        batch = await self._jobs.wait(submitted.id, poll_interval=poll_interval, on_progress=on_progress)
        return AsyncBatchRun(batch, self.results(batch.id))
