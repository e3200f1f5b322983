"""
What the service answers, as typed, frozen dataclasses read from its JSON. The wire shapes are the
contract's (contract/decision.ts, models.ts, batches.ts); tests/test_contract.py compares every
class here with the contract's JSON Schema, field by field, so the two cannot drift apart.

Fields the service adds later are ignored, so an older client keeps working. A field that may be
absent on the wire has a default of None; a field that is always there but may be null has none.

    reply = client.system_one(state="I was charged twice", questions={"refund": noul("Refund?")})
    answer = reply.answers["refund"]
    if isinstance(answer, NoulAnswer):
        answer.noul                         # probability of true
    reply.noul_answer("refund").noul        # the same, raising TypeError for another type
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar, Union

JsonValue: TypeAlias = "str | int | float | bool | None | list[JsonValue] | dict[str, JsonValue]"
"""Any JSON value, as an answer's legend carries it."""

BatchStatus: TypeAlias = Literal["uploading", "queued", "validating", "running", "completed", "failed", "cancelled", "expired"]

# Not a wire field: the request id of the response a resource was read from.
_NOT_WIRE = {"wire": False}


def _request_id() -> Any:
    return field(default=None, repr=False, compare=False, kw_only=True, metadata=_NOT_WIRE)


@dataclass(frozen=True)
class NoulAnswer:
    type: Literal["noul"]
    noul: float
    """Probability of true."""
    option_mass: float | None = None
    """Share of the model's probability that fell on the offered labels; None where unknown."""


@dataclass(frozen=True)
class ChoiceAnswer:
    type: Literal["choice"]
    choice: str
    """The most probable option."""
    probabilities: dict[str, float]
    """Option name -> probability, in the criteria's order."""
    confidence: float
    option_mass: float | None = None


@dataclass(frozen=True)
class ScoreAnswer:
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


@dataclass(frozen=True)
class Usage:
    input_tokens: int
    """Every token the model processed, all passes together."""
    output_tokens: int
    billable_input_tokens: int | None = None
    """Logical input for billing; None on runtimes that do not report it (absent is not zero)."""


_A = TypeVar("_A", NoulAnswer, ChoiceAnswer, ScoreAnswer)


@dataclass(frozen=True)
class DecisionResponse:
    model: str
    """The release that answered (may be the release behind the requested alias)."""
    answers: dict[str, Answer]
    """Question id -> answer, in the order of the request's questions."""
    usage: Usage
    request_id: str | None = _request_id()

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


@dataclass(frozen=True)
class ModelItem:
    name: str
    """The release id."""
    aliases: list[str]
    description: str
    release_date: str
    calibration: str | None = None
    """Path of the release's calibration report; None for an uncalibrated release."""


@dataclass(frozen=True)
class ModelList:
    models: list[ModelItem]
    request_id: str | None = _request_id()


@dataclass(frozen=True)
class RequestCounts:
    total: int
    completed: int
    failed: int


@dataclass(frozen=True)
class BatchError:
    """A batch-level failure (file validation); per-record errors are in the results."""

    code: str
    message: str
    line: int | None


@dataclass(frozen=True)
class BatchProgress:
    records_per_minute: float
    estimated_completion_at: str | None


@dataclass(frozen=True)
class BatchLimits:
    file_bytes: int
    records: int
    results_page: int
    lifetime_seconds: int
    upload_validity_seconds: int
    results_retention_seconds: int


@dataclass(frozen=True)
class Upload:
    """Where and how to upload the input file: a signed PUT, used with exactly these headers."""

    url: str
    method: Literal["PUT"]
    headers: dict[str, str]
    expires_at: str


@dataclass(frozen=True)
class Batch:
    id: str
    object: Literal["batch"]
    status: BatchStatus
    idempotency_key: str
    request_counts: RequestCounts
    created_at: str
    input_bytes: int | None
    submitted_at: str | None
    started_at: str | None
    finished_at: str | None
    expires_at: str
    """The job deadline: a batch not terminal by then expires (committed results stay)."""
    results_expire_at: str | None
    """Results answer 410 from then on; None until terminal."""
    error: BatchError | None
    progress: BatchProgress | None
    limits: BatchLimits
    upload: Upload | None = None
    """Present on create while no input has arrived: a fresh signed destination each time."""
    request_id: str | None = _request_id()

    @property
    def is_terminal(self) -> bool:
        """Completed, failed, cancelled or expired: a state the batch never leaves."""
        return self.status in ("completed", "failed", "cancelled", "expired")


@dataclass(frozen=True)
class BatchList:
    object: Literal["list"]
    data: list[Batch]
    has_more: bool
    next_cursor: str | None
    """Pass as `after` for the next (older) page; None on the last page."""
    request_id: str | None = _request_id()


@dataclass(frozen=True)
class RecordError:
    status: int
    code: str
    message: str


@dataclass(frozen=True)
class ResultSuccess:
    custom_id: str
    response: DecisionResponse


@dataclass(frozen=True)
class ResultFailure:
    custom_id: str
    error: RecordError


ResultRecord: TypeAlias = ResultSuccess | ResultFailure
"""One record of a batch's results: its answer (`ResultSuccess`), or why it has none (`ResultFailure`)."""


@dataclass(frozen=True)
class ResultsPage:
    object: Literal["list"]
    data: list[ResultRecord]
    next_cursor: int | None
    """Pass as `after` for the next page; None on the last page."""


@dataclass(frozen=True)
class UploadResult:
    """What storage answers to an accepted upload."""

    key: str
    size: int
    etag: str


# Reading JSON into these classes.

_T = TypeVar("_T")


class ParseError(ValueError):
    """A JSON value that does not have the shape of the class it is read as."""


def parse(cls: type[_T], value: object, request_id: str | None = None) -> _T:
    """`value` (parsed JSON) as an instance of the dataclass `cls`; ParseError when its shape differs."""
    result = _read(cls, value, cls.__name__)
    if request_id is not None and any(f.name == "request_id" for f in dataclasses.fields(result)):  # type: ignore[arg-type]
        object.__setattr__(result, "request_id", request_id)
    return typing.cast(_T, result)


def wire_fields(cls: type[Any]) -> list[dataclasses.Field[Any]]:
    """The fields of a model class that travel on the wire."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("wire", True)]


_hints_cache: dict[type[Any], dict[str, Any]] = {}


def type_hints(cls: type[Any]) -> dict[str, Any]:
    hints = _hints_cache.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _hints_cache[cls] = hints
    return hints


def _read(tp: Any, value: object, where: str) -> object:
    if isinstance(tp, (str, typing.ForwardRef)) or tp is Any:
        return value  # JsonValue: any JSON
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ParseError(f"{where}: expected one of {typing.get_args(tp)}, got {value!r}")
        return value
    if origin in (Union, types.UnionType):
        errors = []
        for option in typing.get_args(tp):
            try:
                return _read(option, value, where)
            except ParseError as err:
                errors.append(str(err))
        raise ParseError("; ".join(errors))
    if origin is list:
        if not isinstance(value, list):
            raise ParseError(f"{where}: expected a list")
        (item,) = typing.get_args(tp)
        return [_read(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ParseError(f"{where}: expected an object")
        _, item = typing.get_args(tp)
        return {k: _read(item, v, f"{where}.{k}") for k, v in value.items()}
    if tp is type(None):
        if value is not None:
            raise ParseError(f"{where}: expected null")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise ParseError(f"{where}: expected a boolean")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParseError(f"{where}: expected an integer")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParseError(f"{where}: expected a number")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ParseError(f"{where}: expected a string")
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            raise ParseError(f"{where}: expected an object")
        hints = type_hints(tp)
        kwargs: dict[str, object] = {}
        for f in wire_fields(tp):
            if f.name in value:
                kwargs[f.name] = _read(hints[f.name], value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING:
                raise ParseError(f"{where}: {f.name} is missing")
        return tp(**kwargs)
    raise TypeError(f"no reader for {tp!r}")
