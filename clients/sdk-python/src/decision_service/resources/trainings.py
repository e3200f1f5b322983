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
resumes one that was interrupted on the caller's side. The lifecycle is the one every job has
(`_jobs.py`); what is a training's own is its file, its evaluation report and the report's label
audit (the examples whose given label looks wrong, `label_issues`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .._constants import TRAINING_LIST_PAGE_DEFAULT
from .._errors import InputError
from .._input import TrainingInput, encode_training_input
from .._models import AsyncPages, EvaluationReport, LabelIssueList, RankedLabelIssue, Training, TrainingList, TrainingStatus
from .._transport import AsyncTransport, SyncTransport
from ._jobs import DEFAULT_POLL_INTERVAL, AsyncJobs, JobInput, JobKind, Jobs

TrainingProgressCallback = Callable[[Training], object]

_KIND = JobKind("training", "/v1/trainings", "access_token", Training, TrainingList, TRAINING_LIST_PAGE_DEFAULT)


def _encode(file: TrainingInput, model: str | None, default_model: str, metadata: Mapping[str, str] | None, exclude_suspected_labels: bool | None = None) -> JobInput:
    """The file's bytes, the base to ask for (`model`, else the one the file names; none: the service's default), the metadata and the options."""
    data, named = encode_training_input(file, model if model is not None else default_model)
    if model is not None and named is not None and named != model:
        # The worker would fail the training with task_mismatch: said here, before one exists.
        raise InputError(f"the examples name the base model {named!r} (line 1), not {model!r}: every example trains the training's model")
    base = model if model is not None else named
    return {"model": base, "metadata": metadata, "exclude_suspected_labels": exclude_suspected_labels}, data


class Trainings:
    def __init__(self, transport: SyncTransport, default_model: Callable[[], str]) -> None:
        self._jobs = Jobs(transport, _KIND)
        self._default_model = default_model

    def create(
        self,
        *,
        file: TrainingInput,
        model: str | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        exclude_suspected_labels: bool | None = None,
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
        again. `metadata`, your own string pairs (at most 16; keys 1-64 characters, values up to
        512), is returned on the training everywhere it is; the service checks it
        (UnprocessableEntityError naming what is wrong). `exclude_suspected_labels=True` trains a
        second candidate without the examples whose label looks wrong and keeps whichever the
        acceptance rule prefers (the report's `label_audit.retrained` says which).

            training = client.trainings.create(file="examples.jsonl", idempotency_key="triage-v1", metadata={"team": "support"})
        """
        # The missing token is said before the file is read, and a file that cannot be sent before a training exists.
        return self._jobs.start(lambda: _encode(file, model, self._default_model(), metadata, exclude_suspected_labels), idempotency_key=idempotency_key, timeout=timeout)

    def retrieve(self, training_id: str, *, timeout: float | None = None) -> Training:
        """The training's status, progress, timestamps, and its held-out figures once evaluated."""
        return self._jobs.retrieve(training_id, timeout=timeout)

    def list(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        status: TrainingStatus | None = None,
        timeout: float | None = None,
    ) -> TrainingList:
        """
        A page of the account's trainings, newest first (`limit` of them, after `after`; only those
        in `status` when it is given). Iterating it gives every training from it on, each later page
        fetched when the loop reaches it.

            for training in client.trainings.list():
                print(training.id, training.status)
            page = client.trainings.list(limit=50)    # page.data, page.has_more, page.next_cursor
            ready = client.trainings.list(status="ready")
        """
        return self._jobs.list(limit=limit, after=after, timeout=timeout, status=status)

    def cancel(self, training_id: str, *, timeout: float | None = None) -> Training:
        """Cancels a training that has not finished; a finished one is returned unchanged."""
        return self._jobs.cancel(training_id, timeout=timeout)

    def report(self, training_id: str, *, timeout: float | None = None) -> EvaluationReport:
        """
        The evaluation of an accepted or rejected candidate: per question, the held-out figures of
        the candidate and of the base's zero-shot answers, their reliability bins, and why a question
        did not pass; and its `label_audit` (None in reports made before it): how many examples'
        labels look wrong (`suspected` of `examples`), the first of them in `issues`, lowest label
        quality first, and `has_more` when `label_issues` lists more. ConflictError (409
        `report_not_ready`) before the candidate is evaluated.

            report = client.trainings.report(training_id)
            if report.label_audit is not None:
                print(report.label_audit.suspected, [i.custom_id for i in report.label_audit.issues])
        """
        return self._jobs.get(EvaluationReport, _KIND.at(training_id, "report"), timeout=timeout)

    def label_issues(self, training_id: str, *, limit: int | None = None, after: int | None = None, timeout: float | None = None) -> LabelIssueList:
        """
        A page of the examples whose given label looks wrong (the report's label audit), lowest label
        quality first: `limit` of them (1 to 100, 20 when None) ranked after `after` (0 or None: from
        the first; else an earlier page's last `rank`), each with its `rank`, `custom_id`, line, the
        label given and the answer the model prefers. Iterating it gives every issue from it on,
        each later page fetched when the loop reaches it; `next_cursor` is the last rank while
        `has_more`. ConflictError (409 `report_not_ready`) before the candidate is evaluated; an
        empty list for a report without an audit.

            for issue in client.trainings.label_issues(training_id):
                print(issue.rank, issue.custom_id, issue.line, issue.given, issue.preferred)
            page = client.trainings.label_issues(training_id, limit=50, after=20)   # ranks 21 to 70
        """
        page = self._jobs.get(LabelIssueList, _KIND.at(training_id, "label_issues"), query={"limit": limit, "after": after}, timeout=timeout)
        # Private state may change on a frozen model; type checkers see only the frozen dataclass.
        page._fetch = lambda rank: self.label_issues(training_id, limit=limit, after=rank, timeout=timeout)  # type: ignore[misc]
        return page

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
        return self._jobs.wait(training_id, poll_interval=poll_interval, on_progress=on_progress)


class AsyncTrainings:
    def __init__(self, transport: AsyncTransport, default_model: Callable[[], str]) -> None:
        self._transport = transport
        self._jobs = AsyncJobs(transport, _KIND)
        self._default_model = default_model

    async def create(
        self,
        *,
        file: TrainingInput,
        model: str | None = None,
        idempotency_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
        exclude_suspected_labels: bool | None = None,
        timeout: float | None = None,
    ) -> Training:
        """Creates a training, uploads its file and submits it; see `Trainings.create`."""
        return await self._jobs.start(lambda: _encode(file, model, self._default_model(), metadata, exclude_suspected_labels), idempotency_key=idempotency_key, timeout=timeout)

    async def retrieve(self, training_id: str, *, timeout: float | None = None) -> Training:
        """The training's status; see `Trainings.retrieve`."""
        return await self._jobs.retrieve(training_id, timeout=timeout)

    def list(
        self,
        *,
        limit: int | None = None,
        after: str | None = None,
        status: TrainingStatus | None = None,
        timeout: float | None = None,
    ) -> AsyncPages[Training, TrainingList]:
        """
        The account's trainings, newest first: awaited, one page (only those in `status` when it is
        given); iterated with `async for`, every training of every page, each fetched when the loop
        reaches it.

            async for training in client.trainings.list():
                print(training.id, training.status)
        """
        return self._jobs.list(limit=limit, after=after, timeout=timeout, status=status)

    async def cancel(self, training_id: str, *, timeout: float | None = None) -> Training:
        """Cancels a training that has not finished; a finished one is returned unchanged."""
        return await self._jobs.cancel(training_id, timeout=timeout)

    async def report(self, training_id: str, *, timeout: float | None = None) -> EvaluationReport:
        """The evaluation of an accepted or rejected candidate, its label audit's first issues included; see `Trainings.report`."""
        return await self._jobs.get(EvaluationReport, _KIND.at(training_id, "report"), timeout=timeout)

    def label_issues(
        self, training_id: str, *, limit: int | None = None, after: int | None = None, timeout: float | None = None
    ) -> AsyncPages[RankedLabelIssue, LabelIssueList]:
        """
        The examples whose given label looks wrong, lowest label quality first: awaited, one page;
        iterated with `async for`, every issue of every page, each fetched when the loop reaches it
        (see `Trainings.label_issues`).

            async for issue in client.trainings.label_issues(training_id):
                print(issue.rank, issue.custom_id, issue.given, issue.preferred)
            page = await client.trainings.label_issues(training_id, limit=50)
        """
        # Checked here, not when the pages are awaited: a client without the credential, or a bad id, is told at the call.
        self._transport.require(_KIND.credential)
        path = _KIND.at(training_id, "label_issues")

        async def page(rank: int | None) -> LabelIssueList:
            return await self._jobs.get(LabelIssueList, path, query={"limit": limit, "after": rank}, timeout=timeout)

        return AsyncPages(page, after)

    async def wait(
        self,
        training_id: str,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_progress: TrainingProgressCallback | None = None,
    ) -> Training:
        """Polls a training until it is terminal and returns it."""
        return await self._jobs.wait(training_id, poll_interval=poll_interval, on_progress=on_progress)
