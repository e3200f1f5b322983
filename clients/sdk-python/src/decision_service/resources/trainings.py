"""
`client.trainings`: a model of the account's own, trained on labelled examples of one decision. A
training is created, its JSONL training file is PUT to the signed storage address the create answer
names (with no credential of the client), it is submitted, the service's training worker reads every
example through the base model, fits a head per question and evaluates it on held-out examples
against the base's zero-shot answers; a candidate that meets the published acceptance rule becomes
a model that answers decisions with `model=training.model`. `create` does the first three steps:

    client = Client(api_key="svc_...", access_token=token)   # trainings take the signed-in user's token
    training = client.trainings.create(file="examples.jsonl")
    done = client.trainings.wait(training.id, on_progress=lambda t: print(t.status, t.progress and t.progress.step))
    if done.status == "ready":
        client.system_one(model=done.model, state="...", questions=same_questions_as_the_examples)
    else:
        print(done.error or client.trainings.report(done.id).questions[0].reason)

Every route here takes the signed-in user's access token (`access_token=` or SVC_ACCESS_TOKEN), never
the API key; a client without one raises ConfigurationError before any request. Creating again with
the same idempotency key returns the same training, so `create` called again with the same key
resumes one that was interrupted on the caller's side.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from urllib.parse import quote

from .._constants import TRAINING_LIST_PAGE_DEFAULT
from .._errors import InputError
from .._input import TrainingInput, encode_training_input
from .._models import AsyncPages, EvaluationReport, Training, TrainingList, UploadResult
from .._transport import AsyncTransport, Call, SyncTransport, encode_json, read
from .batches import DEFAULT_POLL_INTERVAL

TrainingProgressCallback = Callable[[Training], object]


def _path(training_id: str) -> str:
    if not isinstance(training_id, str) or not training_id:
        raise InputError("a training id is a non-empty string")
    return f"/v1/trainings/{quote(training_id, safe='')}"


def _encode(file: TrainingInput, model: str | None, default_model: str) -> tuple[bytes, str | None]:
    """The file's bytes and the base to ask for: `model`, else the one the file names."""
    data, named = encode_training_input(file, model if model is not None else default_model)
    if model is not None and named is not None and named != model:
        # The worker would fail the training with task_mismatch: said here, before one exists.
        raise InputError(f"the examples name the base model {named!r} (line 1), not {model!r}: every example trains the training's model")
    return data, model if model is not None else named


def _create_call(idempotency_key: str | None, model: str | None) -> Call:
    body: dict[str, str] = {"idempotency_key": idempotency_key if idempotency_key is not None else f"sdk-{uuid.uuid4()}"}
    if model is not None:
        body["model"] = model
    return Call("POST", path="/v1/trainings", body=encode_json(body), credential="access_token")


def _upload_call(training: Training, data: bytes) -> Call:
    assert training.upload is not None
    return Call("PUT", url=training.upload.url, headers=training.upload.headers, body=data, json_body=False)


def _submit_call(training_id: str) -> Call:
    return Call("POST", path=f"{_path(training_id)}/submit", body=b"{}", credential="access_token")


def _retrieve_call(training_id: str) -> Call:
    return Call("GET", path=_path(training_id), credential="access_token")


def _cancel_call(training_id: str) -> Call:
    return Call("POST", path=f"{_path(training_id)}/cancel", body=b"{}", credential="access_token")


def _report_call(training_id: str) -> Call:
    return Call("GET", path=f"{_path(training_id)}/report", credential="access_token")


def _list_call(limit: int | None, after: str | None) -> Call:
    query: dict[str, str | int | None] = {"limit": TRAINING_LIST_PAGE_DEFAULT if limit is None else limit, "after": after}
    return Call("GET", path="/v1/trainings", query=query, credential="access_token")


class Trainings:
    def __init__(self, transport: SyncTransport, default_model: Callable[[], str]) -> None:
        self._transport = transport
        self._default_model = default_model

    def create(
        self,
        *,
        file: TrainingInput,
        model: str | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> Training:
        """
        Creates a training, uploads the training file to its signed destination and submits it;
        returns the training, queued. `file` is an iterable of `{"custom_id", "body", "labels"}`
        examples (written as JSONL; an example whose body names no model gets `model`, else the
        client's `default_model`), the path of a JSONL file, or its bytes (both sent unchanged).
        `model` is the base every example names; when None, the one the file's first line names
        (the shared alias when it names none). InputError when they differ. The same
        `idempotency_key` resumes the same training: a file that has already arrived is not sent
        again.

            training = client.trainings.create(file="examples.jsonl", idempotency_key="triage-v1")
        """
        self._transport.require("access_token")
        # Encoded first, so a file that cannot be sent is refused before a training exists.
        data, base = _encode(file, model, self._default_model())
        created = read(Training, self._transport.request(_create_call(idempotency_key, base), timeout=timeout))
        # No upload destination: this key's training already has its file (a resumed create).
        if created.upload is not None:
            read(UploadResult, self._transport.request(_upload_call(created, data), timeout=timeout))
        return read(Training, self._transport.request(_submit_call(created.id), timeout=timeout))

    def retrieve(self, training_id: str, *, timeout: float | None = None) -> Training:
        """The training's status, progress, timestamps, and its held-out figures once evaluated."""
        self._transport.require("access_token")
        return read(Training, self._transport.request(_retrieve_call(training_id), timeout=timeout))

    def list(self, *, limit: int | None = None, after: str | None = None, timeout: float | None = None) -> TrainingList:
        """
        A page of the account's trainings, newest first (`limit` of them, after `after`). Iterating
        it gives every training from it on, each later page fetched when the loop reaches it.

            for training in client.trainings.list():
                print(training.id, training.status)
            page = client.trainings.list(limit=50)    # page.data, page.has_more, page.next_cursor
        """
        self._transport.require("access_token")
        page = read(TrainingList, self._transport.request(_list_call(limit, after), timeout=timeout))
        # Private state may change on a frozen model; type checkers see only the frozen dataclass.
        page._fetch = lambda cursor: self.list(limit=limit, after=cursor, timeout=timeout)  # type: ignore[misc]
        return page

    def cancel(self, training_id: str, *, timeout: float | None = None) -> Training:
        """Cancels a training that has not finished; a finished one is returned unchanged."""
        self._transport.require("access_token")
        return read(Training, self._transport.request(_cancel_call(training_id), timeout=timeout))

    def report(self, training_id: str, *, timeout: float | None = None) -> EvaluationReport:
        """
        The evaluation of an accepted or rejected candidate: per question, the held-out figures of
        the candidate and of the base's zero-shot answers, their reliability bins, and why a question
        did not pass. ConflictError (409 `report_not_ready`) before the candidate is evaluated.
        """
        self._transport.require("access_token")
        return read(EvaluationReport, self._transport.request(_report_call(training_id), timeout=timeout))

    def wait(
        self,
        training_id: str,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_progress: TrainingProgressCallback | None = None,
    ) -> Training:
        """
        Polls a training until it is terminal (ready, rejected, failed, cancelled or expired) and
        returns it, calling `on_progress` with the training after every poll.
        """
        while True:
            training = self.retrieve(training_id)
            if on_progress is not None:
                on_progress(training)
            if training.is_terminal:
                return training
            time.sleep(poll_interval)


class AsyncTrainings:
    def __init__(self, transport: AsyncTransport, default_model: Callable[[], str]) -> None:
        self._transport = transport
        self._default_model = default_model

    async def create(
        self,
        *,
        file: TrainingInput,
        model: str | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> Training:
        """Creates a training, uploads its file and submits it; see `Trainings.create`."""
        self._transport.require("access_token")
        data, base = _encode(file, model, self._default_model())
        created = read(Training, await self._transport.request(_create_call(idempotency_key, base), timeout=timeout))
        if created.upload is not None:
            read(UploadResult, await self._transport.request(_upload_call(created, data), timeout=timeout))
        return read(Training, await self._transport.request(_submit_call(created.id), timeout=timeout))

    async def retrieve(self, training_id: str, *, timeout: float | None = None) -> Training:
        """The training's status; see `Trainings.retrieve`."""
        self._transport.require("access_token")
        return read(Training, await self._transport.request(_retrieve_call(training_id), timeout=timeout))

    def list(self, *, limit: int | None = None, after: str | None = None, timeout: float | None = None) -> AsyncPages[Training, TrainingList]:
        """
        The account's trainings, newest first: awaited, one page; iterated with `async for`, every
        training of every page, each fetched when the loop reaches it.

            async for training in client.trainings.list():
                print(training.id, training.status)
        """
        self._transport.require("access_token")

        async def page(cursor: str | None) -> TrainingList:
            return read(TrainingList, await self._transport.request(_list_call(limit, cursor), timeout=timeout))

        return AsyncPages(page, after)

    async def cancel(self, training_id: str, *, timeout: float | None = None) -> Training:
        """Cancels a training that has not finished; a finished one is returned unchanged."""
        self._transport.require("access_token")
        return read(Training, await self._transport.request(_cancel_call(training_id), timeout=timeout))

    async def report(self, training_id: str, *, timeout: float | None = None) -> EvaluationReport:
        """The evaluation of an accepted or rejected candidate; see `Trainings.report`."""
        self._transport.require("access_token")
        return read(EvaluationReport, await self._transport.request(_report_call(training_id), timeout=timeout))

    async def wait(
        self,
        training_id: str,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_progress: TrainingProgressCallback | None = None,
    ) -> Training:
        """Polls a training until it is terminal and returns it."""
        while True:
            training = await self.retrieve(training_id)
            if on_progress is not None:
                on_progress(training)
            if training.is_terminal:
                return training
            await asyncio.sleep(poll_interval)
