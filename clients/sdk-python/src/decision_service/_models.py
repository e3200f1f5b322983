"""
What the service answers, as typed, frozen pydantic models read from its JSON. The wire shapes are
the contract's (contract/decision.ts, models.ts, batches.ts, trainings.ts, images.ts, image-models.ts,
credit.ts, usage.ts, keys.ts, webhooks.ts); tests/test_contract.py compares every
class here with the contract's JSON Schema, field by field, so the two cannot drift apart.

Fields the service adds later are ignored, so an older client keeps working. A field that may be
absent on the wire has a default of None; a field that is always there but may be null has none.
Maps keep the order of the JSON they were read from: answers in the order of the questions,
probabilities in the order of the options.

    reply = client.system_one(state="I was charged twice", questions={"refund": noul("Refund?")})
    answer = reply.answers["refund"]
    if isinstance(answer, NoulAnswer):
        answer.noul                         # probability of true
    reply.noul_answer("refund").noul        # the same, raising TypeError for another type
    reply.model_dump()                      # the answer as plain JSON-ready dicts, in wire order
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Annotated, Any, Generic, Literal, Self, TypeAlias, TypeVar

import pydantic
from pydantic import ConfigDict, Field, PrivateAttr

JsonValue: TypeAlias = pydantic.JsonValue
"""Any JSON value, as an answer's legend carries it."""

BatchStatus: TypeAlias = Literal["uploading", "queued", "validating", "running", "completed", "failed", "cancelled", "expired"]
TrainingStatus: TypeAlias = Literal["uploading", "queued", "validating", "running", "accepted", "ready", "rejected", "failed", "cancelled", "expired"]
ImagePurpose: TypeAlias = Literal["prediction", "training"]
ImageAssetStatus: TypeAlias = Literal["uploading", "ready", "rejected"]
ImageFormat: TypeAlias = Literal["jpeg", "png"]
ImageRefusal: TypeAlias = Literal[
    "image_unsupported", "image_type_mismatch", "image_truncated", "image_animated", "image_too_large", "image_undecodable"
]
"""Why the service refused an image (IMAGE_REFUSALS says what each means)."""
ImageModelState: TypeAlias = Literal["training_passed", "api_ready", "rejected"]
UsageGroup: TypeAlias = Literal["day", "key"]
"""What a usage bucket may be per: a UTC day, an API key."""
KeyScope: TypeAlias = Literal["decisions", "decisions_and_batches"]
"""What a scoped API key may call: decisions (decisions, models, image assets and credit), or those and batches."""
KeyStatus: TypeAlias = Literal["active", "revoked", "expired"]
WebhookEventType: TypeAlias = Literal[
    "batch.completed",
    "batch.failed",
    "batch.cancelled",
    "batch.expired",
    "training.ready",
    "training.rejected",
    "training.failed",
    "training.cancelled",
    "training.expired",
]
"""What a webhook endpoint may subscribe to: a batch or a training entering a terminal status (`training.ready`: serving)."""
WebhookDeliveryStatus: TypeAlias = Literal["pending", "delivered", "failed"]


# Each model says frozen=True in its class line, where type checkers read it (as a frozen dataclass's).
class _Model(pydantic.BaseModel, frozen=True):
    # Strict, as JSON's own types: a number is never read from a string, nor an integer from a float or a bool.
    model_config = ConfigDict(strict=True, extra="ignore")


class _Response(_Model, frozen=True):
    """A model the service answers whole, which keeps the request id of the response it was read from."""

    _request_id: str | None = PrivateAttr(default=None)

    @property
    def request_id(self) -> str | None:
        """The service's request id of the response (quote it when asking for help); None inside another answer."""
        return self._request_id

    def __eq__(self, other: object) -> bool:
        # The same values read from two responses are equal: the request id is not part of the value.
        if not isinstance(other, pydantic.BaseModel):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__


_Item = TypeVar("_Item")


class _Pages(_Response, Generic[_Item], frozen=True):
    """
    A page of a cursor-paginated list, as the service answers it. Iterating it gives every item of
    this page and of every page after it, each fetched when the loop reaches it (as the SDKs users
    know do); `iter_pages()` gives the pages. A kind of page says where the next page starts
    (`_next_page_cursor`): the service's `next_cursor`, the last item's id, or its rank.

        for batch in client.batches.list():
            print(batch.id)
    """

    object: Literal["list"]
    data: list[_Item]
    has_more: bool

    # Any: each kind of page is fetched by its own kind of cursor (an id, a rank), as `_next_page_cursor` gives it.
    _fetch: Callable[[Any], Any] | None = PrivateAttr(default=None)

    def _next_page_cursor(self) -> str | int | None:
        """The cursor of the next page (an id, or a rank); None on the last page."""
        raise NotImplementedError

    def iter_pages(self) -> Iterator[Self]:
        page = self
        yield page
        while page.has_more and (cursor := page._next_page_cursor()) is not None and page._fetch is not None:
            page = page._fetch(cursor)
            yield page

    def __iter__(self) -> Iterator[_Item]:  # type: ignore[override]
        for page in self.iter_pages():
            yield from page.data


class _CursorPage(_Pages[_Item], Generic[_Item], frozen=True):
    """A page whose answer names the next page's cursor (`next_cursor`)."""

    next_cursor: str | None
    """Pass as `after` for the next (older) page; None on the last page."""

    def _next_page_cursor(self) -> str | None:
        return self.next_cursor


_Page = TypeVar("_Page", bound=_Pages[Any])


class AsyncPages(Generic[_Item, _Page]):
    """
    An async client's list call: awaited, the first page; iterated with `async for`, every item of
    every page, each page fetched when the loop reaches it.

        async for batch in client.batches.list():
            print(batch.id)
        page = await client.batches.list(limit=50)
    """

    def __init__(self, fetch: Callable[[Any], Awaitable[_Page]], after: str | int | None) -> None:
        self._fetch = fetch
        self._after = after

    def __await__(self) -> Generator[Any, None, _Page]:
        return self._fetch(self._after).__await__()

    async def iter_pages(self) -> AsyncIterator[_Page]:
        page = await self._fetch(self._after)
        yield page
        while page.has_more and (cursor := page._next_page_cursor()) is not None:
            page = await self._fetch(cursor)
            yield page

    async def __aiter__(self) -> AsyncIterator[_Item]:
        async for page in self.iter_pages():
            for item in page.data:
                yield item


class NoulAnswer(_Model, frozen=True):
    type: Literal["noul"]
    noul: float
    """Probability of true."""
    option_mass: float | None = None
    """Share of the model's probability that fell on the offered labels; None where unknown."""


class ChoiceAnswer(_Model, frozen=True):
    type: Literal["choice"]
    choice: str
    """The most probable option."""
    probabilities: dict[str, float]
    """Option name -> probability, in the criteria's order."""
    confidence: float
    option_mass: float | None = None
    unknown_probability: float | None = None
    """An image decision's unknown mass: the model's probability that the image shows none of the
    answers (show "Needs review" when it is the largest). `probabilities` are then conditional on a
    known answer, and `confidence` is the concentration of the whole distribution, unknown included,
    not a calibrated probability of being right. None for text."""


class ScoreAnswer(_Model, frozen=True):
    type: Literal["score"]
    score: float
    """Expected zero-based level."""
    confidence: float
    legend: dict[str, JsonValue]
    """"0".."n-1" -> the level as the request gave it."""
    probabilities: dict[str, float]
    """"0".."n-1" -> probability."""
    option_mass: float | None = None


Answer: TypeAlias = NoulAnswer | ChoiceAnswer | ScoreAnswer


class Usage(_Model, frozen=True):
    input_tokens: int
    """Every token the model processed, all passes together."""
    output_tokens: int
    billable_input_tokens: int | None = None
    """Logical input for billing; None on runtimes that do not report it (absent is not zero)."""


_A = TypeVar("_A", NoulAnswer, ChoiceAnswer, ScoreAnswer)


class DecisionResponse(_Response, frozen=True):
    model: str
    """The release that answered (may be the release behind the requested alias)."""
    answers: dict[str, Annotated[Answer, Field(discriminator="type")]]
    """Question id -> answer, in the order of the request's questions."""
    usage: Usage

    def noul_answer(self, question_id: str) -> NoulAnswer:
        """The answer to a `noul` question (TypeError when it is another type)."""
        return self._answer(question_id, NoulAnswer)

    def choice_answer(self, question_id: str) -> ChoiceAnswer:
        """The answer to a `choice` question (TypeError when it is another type)."""
        return self._answer(question_id, ChoiceAnswer)

    def score_answer(self, question_id: str) -> ScoreAnswer:
        """The answer to a `score` question (TypeError when it is another type)."""
        return self._answer(question_id, ScoreAnswer)

    def _answer(self, question_id: str, cls: type[_A]) -> _A:
        answer = self.answers[question_id]
        if not isinstance(answer, cls):
            raise TypeError(f"question {question_id!r} has a {answer.type} answer, not a {cls.__name__}")
        return answer


class ModelItem(_Model, frozen=True):
    name: str
    """The release id."""
    aliases: list[str]
    description: str
    release_date: str
    calibration: str | None = None
    """Path of the release's calibration report; None for an uncalibrated release."""
    evaluation: str | None = None
    """Path of a trained model's evaluation report (`client.models.evaluation(name)` reads it); None for any other model."""


class ModelList(_Response, frozen=True):
    models: list[ModelItem]


class RequestCounts(_Model, frozen=True):
    total: int
    completed: int
    failed: int


class JobError(_Model, frozen=True):
    """Why a job (a batch, a training) failed as a whole: its file refused or gone. A batch's
    per-record errors are in its results."""

    code: str
    message: str
    line: int | None


#: The earlier name of :class:`JobError`, kept for code written against it.
BatchError = JobError


class BatchProgress(_Model, frozen=True):
    records_per_minute: float
    estimated_completion_at: str | None


class BatchLimits(_Model, frozen=True):
    file_bytes: int
    records: int
    results_page: int
    lifetime_seconds: int
    upload_validity_seconds: int
    results_retention_seconds: int


class Upload(_Model, frozen=True):
    """Where and how to upload the input file: a signed PUT, used with exactly these headers (their content-length is the size the create declared)."""

    url: str
    method: Literal["PUT"]
    headers: dict[str, str]
    expires_at: str


class Batch(_Response, frozen=True):
    id: str
    object: Literal["batch"]
    status: BatchStatus
    idempotency_key: str
    metadata: dict[str, str] | None
    """Your own string pairs given at create (`metadata=`); None when none were."""
    request_counts: RequestCounts
    created_at: str
    input_bytes: int | None
    """The input file's size, as declared at create (None only on a job created before sizes were declared)."""
    submitted_at: str | None
    started_at: str | None
    finished_at: str | None
    expires_at: str
    """The job deadline: a batch not terminal by then expires (committed results stay)."""
    results_expire_at: str | None
    """Results answer 410 from then on; None until terminal."""
    error: JobError | None
    progress: BatchProgress | None
    limits: BatchLimits
    upload: Upload | None = None
    """Present on create while no input has arrived: a fresh signed destination each time."""

    @property
    def is_terminal(self) -> bool:
        """Completed, failed, cancelled or expired: a state the batch never leaves."""
        return self.status in ("completed", "failed", "cancelled", "expired")


class BatchList(_CursorPage[Batch], frozen=True):
    """A page of the account's batches, newest first; iterating it gives every batch from it on (`_CursorPage`)."""


class RetiredModel(_Response, frozen=True):
    """`client.models.retire`: the owner's trained model, no longer served."""

    id: str
    object: Literal["model"]
    retired: Literal[True]


class RecordError(_Model, frozen=True):
    status: int
    code: str
    message: str


class ResultSuccess(_Model, frozen=True):
    custom_id: str
    response: DecisionResponse


class ResultFailure(_Model, frozen=True):
    custom_id: str
    error: RecordError


ResultRecord: TypeAlias = ResultSuccess | ResultFailure
"""One record of a batch's results: its answer (`ResultSuccess`), or why it has none (`ResultFailure`)."""


class ResultsPage(_Model, frozen=True):
    object: Literal["list"]
    data: list[ResultRecord]
    next_cursor: int | None
    """Pass as `after` for the next page; None on the last page."""


class UploadResult(_Model, frozen=True):
    """What storage answers to an accepted upload."""

    key: str
    size: int
    etag: str


class TrainingAcceptance(_Model, frozen=True):
    """The published acceptance rule. Every example is held out once (`folds`-fold cross-validation)
    and the served model is then fitted on all of them. Every question's primary figure must beat the
    base's zero-shot figure on the same examples by `margin` with `confidence` (the lower quantile of a
    paired bootstrap over `resamples` resamples), and its expected calibration error be at most
    `max_ece` plus what a perfectly calibrated model shows on as many examples. An image model's top-1
    accuracy (its answers and "other") must beat chance by `image_margin` alike."""

    margin: float
    max_ece: float
    ece_bins: int
    image_margin: float
    confidence: float
    folds: int
    resamples: int
    ceiling: float
    """The base's figure at or above which it already answers about as well as can be answered: there a
    candidate as good and better calibrated is accepted, and any other is told to use the shared model."""


class TrainingLimits(_Model, frozen=True):
    file_bytes: int
    examples: int
    examples_per_outcome: int
    """Examples a file needs of every outcome of every question (each true and false, option, level)."""
    custom_id_characters: int
    lifetime_seconds: int
    upload_validity_seconds: int
    data_retention_seconds: int
    active_trainings: int
    """Unfinished trainings an account may have at once."""
    stored_trainings: int
    """Trainings whose file and examples an account may keep at once (a cancelled, failed or expired one's are deleted within a minute)."""
    acceptance: TrainingAcceptance


class TrainingExamples(_Model, frozen=True):
    total: int
    held_out: int
    """Examples the figures are measured on: every example, each held out once (k-fold cross-validation)."""


class CurrentFigures(_Model, frozen=True):
    """One question's current held-out figures while a training reads its examples."""

    question: str
    metric: Literal["auroc", "top1"]
    candidate: float
    zero_shot: float
    ece: float


class InterimEvaluation(_Model, frozen=True):
    """A candidate fitted on the examples read so far, on the held-out examples read so far (measured at each quarter)."""

    examples_read: int
    training: int
    held_out: int
    questions: list[CurrentFigures]
    measured_at: str
    baseline: Literal["zero_shot", "chance"] = "zero_shot"
    """What the ``zero_shot`` figures are: the base model's zero-shot answers, or chance (an image model)."""


class TrainingProgress(_Model, frozen=True):
    step: str
    """What the job is doing now, in words a person can act on."""
    examples_total: int
    examples_read: int
    examples_per_minute: float
    estimated_completion_at: str | None
    held_out: InterimEvaluation | None
    """The current held-out figures; None until a quarter of the examples is read."""


class TrainingQuestionFigures(_Model, frozen=True):
    """One question's held-out figures in a training's summary."""

    question: str
    metric: Literal["auroc", "top1"]
    candidate: float
    """The trained model's primary figure (AUROC for a yes/no question, top-1 accuracy otherwise)."""
    zero_shot: float
    """The baseline's primary figure on the same examples (the evaluation's ``baseline``)."""
    ece: float
    passed: bool


class TrainingEvaluation(_Model, frozen=True):
    decision: Literal["accepted", "rejected"]
    baseline: Literal["zero_shot", "chance"]
    """What the ``zero_shot`` figures are: the base model's zero-shot answers, or chance (an image model)."""
    report: str
    """Path of the full report (`client.trainings.report(id)` reads it)."""
    questions: list[TrainingQuestionFigures]


class Training(_Response, frozen=True):
    id: str
    object: Literal["training"]
    status: TrainingStatus
    idempotency_key: str
    metadata: dict[str, str] | None
    """Your own string pairs given at create (`metadata=`); None when none were."""
    base_model: str
    """The base model as asked."""
    base_release: str | None
    """The release the base resolved to at submit; None before."""
    model: str | None
    """The trained model's id once accepted (it answers decisions once `ready`); None otherwise."""
    created_at: str
    input_bytes: int | None
    """The input file's size, as declared at create (None only on a job created before sizes were declared)."""
    submitted_at: str | None
    started_at: str | None
    finished_at: str | None
    expires_at: str
    """The job deadline: a training not finished by then expires."""
    data_expires_at: str | None
    """When the training file and examples are deleted; None until terminal."""
    examples: TrainingExamples
    error: JobError | None
    """Why the file was refused (code, message and the first bad line), for a failed training."""
    progress: TrainingProgress | None
    evaluation: TrainingEvaluation | None
    """Held-out figures once evaluated, with the path of the full report."""
    limits: TrainingLimits
    upload: Upload | None = None
    """Present on create while no file has arrived: a fresh signed destination each time."""

    @property
    def is_terminal(self) -> bool:
        """Ready, rejected, failed, cancelled or expired: a state the training never leaves."""
        return self.status in ("ready", "rejected", "failed", "cancelled", "expired")


class TrainingList(_CursorPage[Training], frozen=True):
    """A page of the account's trainings, newest first; iterating it gives every training from it on (`_CursorPage`)."""


class QuestionFigures(_Model, frozen=True):
    """Held-out figures of one question, for the trained candidate or the base's zero-shot answers."""

    items: int
    primary: float
    """AUROC of p(yes) for a yes/no question, top-1 accuracy otherwise: what acceptance compares."""
    primary_metric: Literal["auroc", "top1"]
    accuracy: float
    log_loss: float
    ece: float
    brier: float


class ReliabilityBin(_Model, frozen=True):
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


class OutcomeFigures(_Model, frozen=True):
    precision: float | None
    """None when the model never gave this answer."""
    recall: float | None


class LearningQuestion(_Model, frozen=True):
    question: str
    candidate: float
    zero_shot: float


class LearningPoint(_Model, frozen=True):
    """The cross-validated primary figure on a stratified subset of the examples, beside the baseline's."""

    examples: int
    questions: list[LearningQuestion]


class FigureInterval(_Model, frozen=True):
    low: float
    high: float


class FigureDifference(_Model, frozen=True):
    estimate: float
    low: float
    high: float


class EvaluationUncertainty(_Model, frozen=True):
    """The sampling error the acceptance rule judged with: bootstrap intervals at `confidence`."""

    confidence: float
    candidate_primary: FigureInterval
    zero_shot_primary: FigureInterval
    difference: FigureDifference
    """The candidate's primary figure less the baseline's, paired over the same resampled examples."""
    candidate_ece: FigureInterval
    ece_noise: float
    """The ECE a perfectly calibrated model shows on this many examples: the allowance over the bound."""
    debiased_ece: float
    zero_shot_ece: float
    at_ceiling: bool


class QuestionEvaluation(_Model, frozen=True):
    question: str
    type: Literal["noul", "choice", "score"]
    outcomes: list[bool | str | int | float | None]
    """The question's outcomes in order: true and false, the option names, or the levels; an image model's "other" is None, last."""
    held_out_counts: list[int]
    """Held-out examples per outcome, in the order of `outcomes`."""
    candidate: QuestionFigures
    zero_shot: QuestionFigures
    reliability_candidate: list[ReliabilityBin]
    reliability_zero_shot: list[ReliabilityBin]
    uncertainty: EvaluationUncertainty | None = None
    """None in reports made before k-fold acceptance."""
    confusion: list[list[int]] | None = None
    """`confusion[t][a]`: examples of outcome t whose most likely answer was a (out-of-fold)."""
    per_outcome: list[OutcomeFigures] | None = None
    passed: bool
    reason: str | None
    """Why the question did not meet the acceptance rule; None when it did."""


class EvaluationExamples(_Model, frozen=True):
    training: int
    held_out: int


class TrainingMethod(_Model, frozen=True):
    kind: Literal["hidden_state_head", "image_head"]
    """A head per question on the base's hidden state, or an image model's one head on the backbone's pooled features."""
    features: int
    regularisation: list[float]
    inputs: list[list[Literal["answer_state", "pooled_state", "label_logprobs", "sentence_embedding"]]] | None = None
    """A text model's inputs per question, as cross-validation chose them; None for an image model."""


class UnknownDetection(_Model, frozen=True):
    """How well an image model's unknown mass ranks the held-out images of none of the answers above the rest."""

    held_out_other: int
    held_out_known: int
    auroc: float | None
    """None when one side has no images."""
    mean_other: float
    mean_known: float


class LabelIssue(_Model, frozen=True):
    """
    An example whose given label looks wrong (the label audit): its `custom_id` and line in the
    training file, the question, the label given and the answer the model prefers, each with its
    out-of-fold probability (the given one is the example's label quality).
    """

    custom_id: str
    line: int
    """The example's line in the training file, from 1."""
    question: str
    given: bool | str | int | float | None
    """The label given, named as `QuestionEvaluation.outcomes` names it (an image model's "other" is None)."""
    preferred: bool | str | int | float | None
    """The answer the model prefers, named the same way."""
    given_probability: float
    """The given label's out-of-fold probability: the example's label quality."""
    preferred_probability: float


class RankedLabelIssue(LabelIssue, frozen=True):
    """A label issue as `trainings.label_issues` lists it: with its rank in the audit (1: the lowest label quality)."""

    rank: int


class LabelAuditRetrained(_Model, frozen=True):
    """
    With `exclude_suspected_labels`: how many examples the second candidate was trained without (every
    example with an issue), which candidate the report and the model are, and why.
    """

    excluded: int
    kept: Literal["all_examples", "without_suspected"]
    reason: str


class LabelAudit(_Model, frozen=True):
    """
    The label audit: confident learning over every example's out-of-fold answer (each answered by
    heads fitted without it). `suspected` counts the label issues of every question; `issues` are the
    first of them (at most 20), lowest label quality first; `has_more` says whether
    `trainings.label_issues` lists more.
    """

    method: Literal["confident_learning"]
    examples: int
    """The examples audited."""
    suspected: int
    issues: list[LabelIssue]
    has_more: bool
    retrained: LabelAuditRetrained | None = None
    """Present when the training asked to train again without the suspects (`exclude_suspected_labels`)."""


class LabelIssueList(_Pages[RankedLabelIssue], frozen=True):
    """
    A page of a training's label issues, in the audit's order (lowest label quality first);
    iterating it gives every issue from it on (`_Pages`). The next page starts after this page's
    last rank (`next_cursor`).

        for issue in client.trainings.label_issues(training_id):
            print(issue.rank, issue.custom_id, issue.line, issue.given, issue.preferred)
    """

    @property
    def next_cursor(self) -> int | None:
        """The last issue's rank, to pass as `after` for the next page; None on the last page."""
        return self.data[-1].rank if self.has_more and self.data else None

    def _next_page_cursor(self) -> int | None:
        return self.next_cursor


class EvaluationReport(_Response, frozen=True):
    """A trained candidate's evaluation, accepted or rejected."""

    object: Literal["training.report"]
    training: str
    model: str | None
    """The trained model's id when accepted; None when rejected."""
    base_release: str
    decision: Literal["accepted", "rejected"]
    acceptance: TrainingAcceptance
    examples: EvaluationExamples
    method: TrainingMethod
    questions: list[QuestionEvaluation]
    evaluated_at: str
    training_ms: float
    unknown: UnknownDetection | None = None
    """An image model's unknown detection on its out-of-fold answers; None for a text model."""
    learning_curve: list[LearningPoint] | None = None
    advice: str | None = None
    """What to do next, in a sentence (use the shared model, add examples, check the labels)."""
    baseline: Literal["zero_shot", "chance"] = "zero_shot"
    """What the ``zero_shot`` figures are: the base model's zero-shot answers, or chance (an image model)."""
    """The figures on a quarter, half, three quarters and all of the examples: still rising at the end, more examples would likely help."""
    label_audit: LabelAudit | None = None
    """The examples whose given label looks wrong, the first of them (`trainings.label_issues` lists them all); None in reports made before it."""


class ImageSource(_Model, frozen=True):
    """The original file of a ready image asset: its format and decoded size, upright."""

    format: ImageFormat
    width: int
    height: int


class CanonicalImage(_Model, frozen=True):
    """The image the models read: upright, every metadata block removed, an RGB PNG."""

    width: int
    height: int
    bytes: int
    sha256: str


class ImageAssetError(_Model, frozen=True):
    """Why a rejected image asset was refused (the code of its 422 too)."""

    code: ImageRefusal
    message: str


class ImageAsset(_Response, frozen=True):
    """A still photo uploaded once, checked and made canonical by the service, named by its id in image decisions."""

    id: str
    object: Literal["image_asset"]
    purpose: ImagePurpose
    status: ImageAssetStatus
    filename: str
    """Display metadata only: no model sees it."""
    source_bytes: int
    sha256: str
    created_at: str
    expires_at: str | None
    """When the asset and its files are deleted: 24 hours after creation, or 30 days after the end of
    the training job that took it (None while that job runs)."""
    source: ImageSource | None
    """Once ready: the original's format and size; None before."""
    canonical: CanonicalImage | None
    """Once ready: the canonical image; None before."""
    error: ImageAssetError | None
    """Once rejected: why; None otherwise."""
    upload: Upload | None = None
    """On create only: where to PUT the file, with exactly these headers."""


class ImageModelTask(_Model, frozen=True):
    """What every decision with an image model must repeat: its one question, exactly as saved."""

    question_id: str
    """The question's id in `questions`."""
    question: JsonValue
    """The question exactly as a decision sends it (a `choice`, its answers in outcome order)."""
    outcome_order: list[str]
    """The answers' names in outcome order: the key order of `question["criteria"]`."""


class ImageModelEvaluation(_Model, frozen=True):
    """Held-out figures from an image model's report."""

    accuracy: float
    """Top-1 accuracy over the answers and "other"."""
    chance: float
    """Chance's top-1 accuracy (the training part's outcome frequencies)."""
    ece: float
    unknown_auroc: float | None
    """AUROC of the unknown mass, images of none of the answers against the rest; None without such images."""


class ImageModel(_Model, frozen=True):
    """An image training of the account with a result, as `client.image_models.list()` shows it."""

    object: Literal["image_model"]
    id: str | None
    """What decisions name as `model`; None for a rejected result."""
    training: str
    """The training that made it (`client.trainings.retrieve`, and its report)."""
    state: ImageModelState
    """`training_passed` (registered, not served yet), `api_ready` (decisions may use it) or `rejected`."""
    task: ImageModelTask
    evaluation: ImageModelEvaluation | None
    created_at: str
    finished_at: str | None


class ImageModelList(_Response, frozen=True):
    object: Literal["list"]
    data: list[ImageModel]
    """Newest first."""


class CreditPricing(_Model, frozen=True):
    """The published price of image decisions."""

    currency: Literal["USD"]
    micro_usd_per_billable_token: int


class CreditBalance(_Response, frozen=True):
    """The account's prepaid credit for image decisions, in integer micro-USD (millionths of a dollar)."""

    object: Literal["credit_balance"]
    balance_micro_usd: int
    """What new image decisions may reserve: granted credit less what was charged and what is reserved."""
    reserved_micro_usd: int
    """Held by image decisions in flight; given back, in whole or in part, when each ends."""
    pricing: CreditPricing



class UsageCounts(_Model, frozen=True):
    """What one usage bucket (or the totals) counts, as the service recorded it."""

    requests: int
    """Real-time decisions answered (system_one and image decisions)."""
    batch_records: int
    """Batch records answered."""
    input_tokens: int
    """The full processed context, as used for resource limits."""
    billable_input_tokens: int
    """The logical input billed, where the runtime reported it."""
    billable_unreported: int
    """Answers whose runtime reported no billable count (absent is not zero: not in `billable_input_tokens`)."""
    output_tokens: int
    image_credit_micro_usd: int
    """Image credit charged for image decisions, in millionths of a US dollar."""


class UsageBucket(UsageCounts, frozen=True):
    """One bucket's counts, and what it is per."""

    day: str | None
    """The UTC day (YYYY-MM-DD), when grouped by day; None otherwise."""
    key_id: str | None
    """The API key, when grouped by key; None otherwise, and for a signed-in session's image decisions."""
    key_name: str | None
    """That key's name (a revoked key's too)."""


class UsageReport(_Response, frozen=True):
    """
    The account's usage (GET /v1/usage; the contract's `Usage`, named apart from a decision's token
    `Usage`): per UTC day and per API key over at most 30 days.
    """

    object: Literal["usage"]
    start: str
    """The first UTC day counted (inclusive)."""
    end: str
    """The last UTC day counted (inclusive)."""
    group_by: list[UsageGroup]
    data: list[UsageBucket]
    """Oldest day first, then by key name; grouped by day alone, every day of the range (zeros included)."""
    totals: UsageCounts


class KeyMetadata(_Response, frozen=True):
    """An API key of the account as listings show it (never its secret), and as revoking it answers."""

    id: str
    """The key's id: the lookup part of its secret (`svc_<id>_...`), what `keys.revoke` takes."""
    name: str
    status: KeyStatus
    created_at: str
    revoked_at: str | None
    expires_at: str | None
    """When the key stops working (then 401 `expired_key`); None: never."""
    scope: KeyScope | None
    """What the key may call (otherwise 403 `insufficient_scope`); None: every route an API key can call."""
    models: list[str] | None
    """The only models its calls may name (otherwise 403 `insufficient_scope`); None: any the account may use."""


class CreatedKey(KeyMetadata, frozen=True):
    """A new API key: its metadata and its secret, which the service shows this once."""

    secret: str
    """The key itself (`svc_<id>_<secret>`), for `Client(api_key=...)`; never shown again."""


class KeyList(_Response, frozen=True):
    keys: list[KeyMetadata]
    """Every key of the account, newest first."""


class WebhookEndpoint(_Response, frozen=True):
    """An HTTPS endpoint of the account that is told when its jobs end (never its secret)."""

    id: str
    object: Literal["webhook_endpoint"]
    url: str
    events: list[str]
    """The events it subscribes to (WEBHOOK_EVENTS names them)."""
    description: str | None
    created_at: str
    secret_rotated_at: str | None
    """When the secret was last rotated; None if never."""


class WebhookEndpointWithSecret(WebhookEndpoint, frozen=True):
    """An endpoint as its creation and a rotation answer it: with its signing secret, shown only then."""

    secret: str
    """`whsec_...`: what `webhooks.verify` checks the deliveries' signatures with; never shown again."""


class WebhookEndpointList(_Response, frozen=True):
    object: Literal["list"]
    data: list[WebhookEndpoint]
    """Every endpoint of the account, newest first."""


class DeletedWebhookEndpoint(_Response, frozen=True):
    id: str
    object: Literal["webhook_endpoint"]
    deleted: Literal[True]


class WebhookEventData(_Model, frozen=True):
    """The job a webhook event is about, as it ended (fetch it for the rest)."""

    object: Literal["batch", "training"]
    id: str
    status: str
    metadata: dict[str, str] | None
    """The job's own string pairs given at create; None when none were."""


class WebhookEvent(_Model, frozen=True):
    """What an endpoint receives, as `webhooks.verify` reads it from a delivery's body."""

    type: str
    """The event, e.g. `batch.completed` (one of WEBHOOK_EVENTS)."""
    timestamp: str
    """When the change committed (RFC 3339, UTC)."""
    data: WebhookEventData


class WebhookDelivery(_Model, frozen=True):
    """One event's delivery to one endpoint, as its log shows it."""

    id: str
    object: Literal["webhook_delivery"]
    event_id: str
    """The event's id: the `webhook-id` header, the same on every attempt."""
    event_type: str
    job_id: str
    """The batch or training the event is about."""
    status: WebhookDeliveryStatus
    attempts: int
    created_at: str
    last_attempt_at: str | None
    last_status_code: int | None
    """The receiver's HTTP status at the last attempt; None when none came (timeout, refused, not allowed)."""
    last_error: str | None
    """Why the last attempt failed: `http_status`, `timeout`, `connection_failed`, `address_not_allowed` or `redirect`."""
    next_attempt_at: str | None
    """When a pending delivery is tried next; None otherwise."""
    finished_at: str | None


class WebhookDeliveryList(_Pages[WebhookDelivery], frozen=True):
    """
    A page of an endpoint's delivery log, newest first; iterating it gives every delivery from it on
    (`_Pages`). The next page starts after this page's last delivery (`next_cursor`).
    """

    @property
    def next_cursor(self) -> str | None:
        """The last delivery's id, to pass as `after` for the next (older) page; None on the last page."""
        return self.data[-1].id if self.has_more and self.data else None

    def _next_page_cursor(self) -> str | None:
        return self.next_cursor


_M = TypeVar("_M", bound=pydantic.BaseModel)


def parse(cls: type[_M], value: object, request_id: str | None = None) -> _M:
    """`value` (parsed JSON) as `cls`, with the request id of its response; pydantic.ValidationError when its shape differs."""
    model = cls.model_validate(value)
    if isinstance(model, _Response):
        # Private state may change on a frozen model; type checkers see only the frozen dataclass.
        model._request_id = request_id  # type: ignore[misc]
    return model
