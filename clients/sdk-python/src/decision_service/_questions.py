"""
Questions as plain typed dicts, and the helpers that build them. The service checks every bound
(2-255 options, 2-10 levels), so nothing here repeats them. A dict keeps the order it is written in,
and that order is sent: the order of the questions is the order of the answers, and the order of a
choice's options is the tie order.

    questions = {
        "refund": noul("Does the customer want money back?"),
        "topic": choice(["billing", "shipping", "bug"], "What is the ticket about?"),
        "severity": score(["low", "medium", "high"]),
    }
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, NotRequired, TypeAlias, TypedDict

Instructions: TypeAlias = "str | Mapping[str, object] | Sequence[object] | None"
"""Text, a JSON object or array, or None."""

Description: TypeAlias = "str | int | float | bool | Mapping[str, object] | Sequence[object] | None"
"""What an option or a truth value means: text, structured JSON, or None."""


class NoulCriteria(TypedDict, total=False):
    true: Description
    false: Description


class NoulQuestion(TypedDict):
    type: Literal["noul"]
    instructions: NotRequired[Instructions]
    criteria: NotRequired[NoulCriteria | None]


class ChoiceQuestion(TypedDict):
    type: Literal["choice"]
    instructions: NotRequired[Instructions]
    criteria: Mapping[str, Description]
    """Option name -> description (may be None); the order is the tie order."""


class ScoreQuestion(TypedDict):
    type: Literal["score"]
    instructions: NotRequired[Instructions]
    criteria: Sequence[str | int | float | bool | Mapping[str, object] | Sequence[object]]
    """The legend, level 0 first; each level text or structured JSON (never None)."""


Question: TypeAlias = NoulQuestion | ChoiceQuestion | ScoreQuestion

State: TypeAlias = "str | Mapping[str, object] | Sequence[object]"
"""What the questions are about: text, a JSON object or an array."""


class DecisionRequest(TypedDict):
    """The body of a decision, as a batch record's `body` holds it."""

    state: State
    questions: Mapping[str, Question]
    model: NotRequired[str]
    images: NotRequired[Sequence[Mapping[str, str]]]


class InputRecord(TypedDict):
    """One line of a batch's input: `custom_id` unique in the file, `body` a decision request."""

    custom_id: str
    body: DecisionRequest


Label: TypeAlias = "bool | str | int | None"
"""A question's right answer in a training example: true or false (noul), an option name (choice), a zero-based level (score); for an image example, an answer's name or None (an image of none of them)."""


class TrainingExample(TypedDict):
    """
    One line of a training file: a decision request and its right answers, one label per question.
    Every example asks the same questions (ids, types, instructions, criteria, in order) of the same base.

        {"custom_id": "t-1", "body": {"state": "A goat on the hill.", "questions": {"animal": noul("An animal?")}}, "labels": {"animal": True}}
    """

    custom_id: str
    body: DecisionRequest
    labels: Mapping[str, Label]


def noul(instructions: Instructions = None, criteria: NoulCriteria | None = None) -> NoulQuestion:
    """
    A yes/no question; its answer is the probability of true.

        questions={"refund": noul("Does the customer ask for a refund?")}
    """
    question: NoulQuestion = {"type": "noul"}
    if instructions is not None:
        question["instructions"] = instructions
    if criteria is not None:
        question["criteria"] = criteria
    return question


def choice(criteria: Sequence[str] | Mapping[str, Description], instructions: Instructions = None) -> ChoiceQuestion:
    """
    Pick one named option: a list of names, or a mapping of each name to its description (or None).

        questions={"topic": choice(["billing", "bug", "other"])}
        questions={"topic": choice({"billing": "money matters", "bug": "a defect", "other": None}, "What is it about?")}
    """
    if isinstance(criteria, str):
        raise TypeError("choice() takes a list of option names or a mapping of names to descriptions, not one string")
    options: Mapping[str, Description] = criteria if isinstance(criteria, Mapping) else {name: None for name in criteria}
    question: ChoiceQuestion = {"type": "choice", "criteria": options}
    if instructions is not None:
        question["instructions"] = instructions
    return question


def score(
    criteria: Sequence[str | int | float | bool | Mapping[str, object] | Sequence[object]],
    instructions: Instructions = None,
) -> ScoreQuestion:
    """
    Ordered levels, level 0 first; the answer is the expected level.

        questions={"severity": score(["none", "minor", "major", "critical"], "How severe is it?")}
    """
    if isinstance(criteria, str):
        raise TypeError("score() takes a list of levels, not one string")
    question: ScoreQuestion = {"type": "score", "criteria": criteria}
    if instructions is not None:
        question["instructions"] = instructions
    return question
