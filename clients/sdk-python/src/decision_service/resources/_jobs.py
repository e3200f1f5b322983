"""
The lifecycle every kind of job shares, written once for the sync and the async client: a job is
created under an idempotency key (the same key finds the same job), its input is PUT to the signed
storage address the create answer names (with no credential of the client), it is submitted,
retrieved, cancelled, listed page by page, and polled until it is terminal. A create declares the
input's size, and its signed upload takes exactly that many bytes. `client.batches` and
`client.trainings` each hold a `Jobs` (or `AsyncJobs`) of their kind and keep only what differs:
what create sends, how the input is encoded, and their extras (a batch's results, a training's
report).

    jobs = Jobs(transport, JobKind("batch", "/v1/batches", "api_key", Batch, BatchList, BATCH_LIST_PAGE_DEFAULT))
    submitted = jobs.start(lambda: ({}, data), idempotency_key="tickets-2026-11-22")
    done = jobs.wait(submitted.id, on_progress=lambda b: print(b.status))
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import quote

import pydantic

from .._errors import InputError
from .._models import AsyncPages, Batch, BatchList, Training, TrainingList, UploadResult
from .._settings import Credential
from .._transport import AsyncTransport, Call, SyncTransport, encode_json, read

DEFAULT_POLL_INTERVAL = 2.0
"""Seconds between polls of `wait` (and of `batches.run`)."""

# The kinds of job there are; a new kind's job and page models join these constraints.
Job = TypeVar("Job", Batch, Training)
Page = TypeVar("Page", BatchList, TrainingList)
_M = TypeVar("_M", bound=pydantic.BaseModel)

JobInput = tuple[dict[str, object], bytes]
"""A job's input, encoded: the fields its create sends beside the idempotency key and the size (None ones are not sent), and the bytes to upload."""


@dataclass(frozen=True)
class JobKind(Generic[Job, Page]):
    """What one kind of job differs in, as far as the shared lifecycle is concerned, and the calls that follow from it."""

    noun: str
    """How messages name one job of the kind: "batch", "training"."""
    path: str
    """The collection's path, e.g. `/v1/batches`; one job is `{path}/{id}`."""
    credential: Credential
    """The credential every route of the kind takes."""
    job: type[Job]
    page: type[Page]
    list_limit: int
    """Jobs per list page when the caller names no `limit`."""

    def at(self, job_id: str, action: str | None = None) -> str:
        """`{path}/{id}`, then `/{action}` when one is named; InputError for an id that is not a non-empty string."""
        if not isinstance(job_id, str) or not job_id:
            raise InputError(f"a {self.noun} id is a non-empty string")
        path = f"{self.path}/{quote(job_id, safe='')}"
        return path if action is None else f"{path}/{action}"

    def get(self, path: str, query: Mapping[str, str | int | None] | None = None) -> Call:
        return Call("GET", path=path, query=query or {}, credential=self.credential)

    def post(self, path: str, fields: Mapping[str, object] | None = None) -> Call:
        return Call("POST", path=path, body=b"{}" if fields is None else encode_json(fields), credential=self.credential)

    def create(self, idempotency_key: str | None, input_bytes: int, fields: Mapping[str, object]) -> Call:
        """
        The create of a job whose input will be `input_bytes` long, under `idempotency_key` (a random
        one when None), with `fields` beside them; a field that is None is not sent.
        """
        key = idempotency_key if idempotency_key is not None else f"sdk-{uuid.uuid4()}"
        return self.post(self.path, {"idempotency_key": key, "input_bytes": input_bytes, **{k: v for k, v in fields.items() if v is not None}})

    def upload(self, job: Job, encode: Callable[[], bytes]) -> Call:
        """
        The PUT of the job's input to its signed destination, with exactly its headers (their
        content-length included, which httpx keeps as given); `encode` runs once the job is known to
        take input. Input of another length than the job was created for is refused before it is
        sent: storage would refuse it.
        """
        if job.upload is None:
            raise InputError(
                f"this {self.noun} has no upload destination: its input has already arrived (submit it), "
                "or create it again with the same idempotency key"
            )
        data = encode()
        if job.input_bytes is not None and len(data) != job.input_bytes:
            raise InputError(
                f"the input is {len(data)} bytes, but this {self.noun} was created for {job.input_bytes} bytes "
                f"(its signed upload takes exactly that many): upload the input it was created for, or create a new {self.noun} for this one"
            )
        return Call("PUT", url=job.upload.url, headers=job.upload.headers, body=data, json_body=False)

    def list(self, limit: int | None, after: str | None, status: str | None = None) -> Call:
        """A page of the kind's jobs; only those in `status` when one is named (the service refuses an unknown one with 422)."""
        return self.get(self.path, {"limit": self.list_limit if limit is None else limit, "after": after, "status": status})


class Jobs(Generic[Job, Page]):
    """A kind's lifecycle on the sync client."""

    def __init__(self, transport: SyncTransport, kind: JobKind[Job, Page]) -> None:
        self._transport = transport
        self.kind: JobKind[Job, Page] = kind

    def get(self, cls: type[_M], path: str, *, query: Mapping[str, str | int | None] | None = None, timeout: float | None = None) -> _M:
        """A GET under the kind's path with its credential, read as `cls`: a kind's extra (report, results page)."""
        return read(cls, self._transport.request(self.kind.get(path, query), timeout=timeout))

    def create(self, idempotency_key: str | None, input_bytes: int, fields: Mapping[str, object], *, timeout: float | None = None) -> Job:
        return read(self.kind.job, self._transport.request(self.kind.create(idempotency_key, input_bytes, fields), timeout=timeout))

    def upload(self, job: Job, encode: Callable[[], bytes], *, timeout: float | None = None) -> UploadResult:
        return read(UploadResult, self._transport.request(self.kind.upload(job, encode), timeout=timeout))

    def submit(self, job_id: str, *, timeout: float | None = None) -> Job:
        return read(self.kind.job, self._transport.request(self.kind.post(self.kind.at(job_id, "submit")), timeout=timeout))

    def retrieve(self, job_id: str, *, timeout: float | None = None) -> Job:
        return self.get(self.kind.job, self.kind.at(job_id), timeout=timeout)

    def cancel(self, job_id: str, *, timeout: float | None = None) -> Job:
        return read(self.kind.job, self._transport.request(self.kind.post(self.kind.at(job_id, "cancel")), timeout=timeout))

    def list(self, *, limit: int | None, after: str | None, timeout: float | None, status: str | None = None) -> Page:
        """One page; iterating it fetches every later page as the loop reaches it (`_CursorPage`)."""
        self._transport.require(self.kind.credential)
        page = read(self.kind.page, self._transport.request(self.kind.list(limit, after, status), timeout=timeout))
        # Private state may change on a frozen model; type checkers see only the frozen dataclass.
        page._fetch = lambda cursor: self.list(limit=limit, after=cursor, timeout=timeout, status=status)  # type: ignore[misc]
        return page

    def wait(self, job_id: str, *, poll_interval: float, on_progress: Callable[[Job], object] | None) -> Job:
        while True:
            job = self.retrieve(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.is_terminal:
                return job
            time.sleep(poll_interval)

    def start(self, encode: Callable[[], JobInput], *, idempotency_key: str | None, timeout: float | None = None) -> Job:
        """
        Creates a job (or finds the one `idempotency_key` made), uploads its input unless that has
        already arrived, and submits it; returns the submitted job. The credential is checked and the
        input encoded first, so input that cannot be sent is refused before a job exists.
        """
        self._transport.require(self.kind.credential)
        fields, data = encode()
        created = self.create(idempotency_key, len(data), fields, timeout=timeout)
        # No upload destination: this key's job already has its input (a resumed create or run).
        if created.upload is not None:
            self.upload(created, lambda: data, timeout=timeout)
        return self.submit(created.id, timeout=timeout)


class AsyncJobs(Generic[Job, Page]):
    """A kind's lifecycle on the async client; see `Jobs`."""

    def __init__(self, transport: AsyncTransport, kind: JobKind[Job, Page]) -> None:
        self._transport = transport
        self.kind: JobKind[Job, Page] = kind

    async def get(self, cls: type[_M], path: str, *, query: Mapping[str, str | int | None] | None = None, timeout: float | None = None) -> _M:
        return read(cls, await self._transport.request(self.kind.get(path, query), timeout=timeout))

    async def create(self, idempotency_key: str | None, input_bytes: int, fields: Mapping[str, object], *, timeout: float | None = None) -> Job:
        return read(self.kind.job, await self._transport.request(self.kind.create(idempotency_key, input_bytes, fields), timeout=timeout))

    async def upload(self, job: Job, encode: Callable[[], bytes], *, timeout: float | None = None) -> UploadResult:
        return read(UploadResult, await self._transport.request(self.kind.upload(job, encode), timeout=timeout))

    async def submit(self, job_id: str, *, timeout: float | None = None) -> Job:
        return read(self.kind.job, await self._transport.request(self.kind.post(self.kind.at(job_id, "submit")), timeout=timeout))

    async def retrieve(self, job_id: str, *, timeout: float | None = None) -> Job:
        return await self.get(self.kind.job, self.kind.at(job_id), timeout=timeout)

    async def cancel(self, job_id: str, *, timeout: float | None = None) -> Job:
        return read(self.kind.job, await self._transport.request(self.kind.post(self.kind.at(job_id, "cancel")), timeout=timeout))

    def list(self, *, limit: int | None, after: str | None, timeout: float | None, status: str | None = None) -> AsyncPages[Job, Page]:
        """Awaited, one page; iterated with `async for`, every job of every page (`AsyncPages`)."""
        # Checked here, not when the pages are awaited: a client without the credential is told at the call.
        self._transport.require(self.kind.credential)

        async def page(cursor: str | None) -> Page:
            return read(self.kind.page, await self._transport.request(self.kind.list(limit, cursor, status), timeout=timeout))

        return AsyncPages(page, after)

    async def wait(self, job_id: str, *, poll_interval: float, on_progress: Callable[[Job], object] | None) -> Job:
        while True:
            job = await self.retrieve(job_id)
            if on_progress is not None:
                on_progress(job)
            if job.is_terminal:
                return job
            await asyncio.sleep(poll_interval)

    async def start(self, encode: Callable[[], JobInput], *, idempotency_key: str | None, timeout: float | None = None) -> Job:
        self._transport.require(self.kind.credential)
        fields, data = encode()
        created = await self.create(idempotency_key, len(data), fields, timeout=timeout)
        if created.upload is not None:
            await self.upload(created, lambda: data, timeout=timeout)
        return await self.submit(created.id, timeout=timeout)
