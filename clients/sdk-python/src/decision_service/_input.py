"""
A batch's input file, or a training file, as bytes: JSONL written from records, a JSONL file read
from a path, or bytes given as they are. Records get the client's default model where they name
none, as real-time requests do, and training examples the training's `model`, else the client's
default model; a file or bytes are sent unchanged. The bounds the service publishes on every file
(25 MiB, 10,000 records or examples) are checked here, so a file that cannot be accepted is refused
before anything is uploaded; everything else (a training file's labels and outcome counts included)
is the service's to check, and it names the first bad line.

An image asset's file is a path, bytes or a binary file object, sent unchanged; its size is checked
(at most 10 MiB) before more than that is read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import BinaryIO, TypeAlias

from ._constants import BULK_FILE_BYTES, BULK_FILE_RECORDS, IMAGE_SOURCE_BYTES, SHARED_ALIAS, TRAINING_FILE_BYTES, TRAINING_FILE_EXAMPLES
from ._errors import InputError
from ._questions import InputRecord, TrainingExample
from ._transport import encode_json

BatchInput: TypeAlias = "Iterable[InputRecord] | str | os.PathLike[str] | bytes"
"""Records, the path of a JSONL file, or the file's bytes."""

TrainingInput: TypeAlias = "Iterable[TrainingExample] | str | os.PathLike[str] | bytes"
"""Labelled examples, the path of a JSONL training file, or the file's bytes."""

ImageInput: TypeAlias = "str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO"
"""A photo: the path of a file, its bytes, or a binary file object (open(path, "rb"))."""


def encode_input(source: BatchInput, default_model: str) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview, str, os.PathLike)):
        data = _read(source, "batch file")
    else:
        data = _encode_records(source, default_model)
    if not data:
        raise InputError("the batch file is empty")
    if len(data) > BULK_FILE_BYTES:
        raise InputError(f"the batch file is {len(data)} bytes; a batch holds at most {BULK_FILE_BYTES} bytes")
    return data


def encode_training_input(source: TrainingInput, default_model: str) -> tuple[bytes, str | None]:
    """
    The training file's bytes (examples without a `body.model` get `default_model`), and the base
    model its first line names (the shared alias when it names none); None when that line cannot be
    read, which the service will say, naming it.
    """
    if isinstance(source, (bytes, bytearray, memoryview, str, os.PathLike)):
        data = _read(source, "training file")
    else:
        data = _encode_examples(source, default_model)
    if not data:
        raise InputError("the training file is empty")
    if len(data) > TRAINING_FILE_BYTES:
        raise InputError(f"the training file is {len(data)} bytes; a training file holds at most {TRAINING_FILE_BYTES} bytes")
    return data, _first_base(data)


def _first_base(data: bytes) -> str | None:
    try:
        first = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return None
    body = first.get("body") if isinstance(first, dict) else None
    model = body.get("model", SHARED_ALIAS) if isinstance(body, dict) else None
    return model if isinstance(model, str) else None


def _read(source: str | os.PathLike[str] | bytes | bytearray | memoryview, what: str) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    try:
        return Path(source).read_bytes()
    except OSError as err:
        raise InputError(f"cannot read the {what} {os.fspath(source)}: {err.strerror or err}") from None


def _encode_records(records: Iterable[InputRecord], default_model: str) -> bytes:
    lines: list[bytes] = []
    for record in records:
        if not isinstance(record, Mapping) or "custom_id" not in record or "body" not in record:
            raise InputError("each batch record is a mapping with custom_id and body")
        if len(lines) >= BULK_FILE_RECORDS:
            raise InputError(f"more than {BULK_FILE_RECORDS} records; a batch holds at most {BULK_FILE_RECORDS}")
        body = dict(record["body"])
        body.setdefault("model", default_model)
        lines.append(encode_json({**record, "body": body}))
    if not lines:
        raise InputError("the batch has no records")
    return b"\n".join(lines) + b"\n"


def _encode_examples(examples: Iterable[TrainingExample], default_model: str) -> bytes:
    lines: list[bytes] = []
    for example in examples:
        if not isinstance(example, Mapping) or not {"custom_id", "body", "labels"} <= example.keys():
            raise InputError("each training example is a mapping with custom_id, body and labels")
        if len(lines) >= TRAINING_FILE_EXAMPLES:
            raise InputError(f"more than {TRAINING_FILE_EXAMPLES} examples; a training file holds at most {TRAINING_FILE_EXAMPLES}")
        body = dict(example["body"])
        body.setdefault("model", default_model)
        lines.append(encode_json({**example, "body": body}))
    if not lines:
        raise InputError("the training file has no examples")
    return b"\n".join(lines) + b"\n"


def read_image(source: ImageInput) -> tuple[bytes, str | None]:
    """The photo's bytes, checked for size, and its own file name when it has one (a path's, a file object's)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        _check_image_size(len(data), "the image")
        return data, None
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        what = f"the image {os.fspath(source)}"
        try:
            if path.is_file():
                _check_image_size(path.stat().st_size, what)
            data = path.read_bytes()
        except OSError as err:
            raise InputError(f"cannot read {what}: {err.strerror or err}") from None
        _check_image_size(len(data), what)
        return data, path.name
    if hasattr(source, "read"):
        # One byte past the limit is enough to know that a file is over it.
        data = source.read(IMAGE_SOURCE_BYTES + 1)
        if not isinstance(data, bytes):
            raise InputError("an image file object is read in binary mode: open(path, 'rb')")
        _check_image_size(len(data), "the image", read_to_limit=True)
        name = getattr(source, "name", None)
        return data, os.path.basename(name) if isinstance(name, str) else None
    raise InputError("an image is the path of a file, its bytes, or a binary file object")


def _check_image_size(size: int, what: str, *, read_to_limit: bool = False) -> None:
    if size == 0:
        raise InputError(f"{what} is empty")
    if size > IMAGE_SOURCE_BYTES:
        # A file object is read only to one byte past the limit: its own size is not known.
        told = f"more than {IMAGE_SOURCE_BYTES}" if read_to_limit else str(size)
        raise InputError(f"{what} is {told} bytes; an image asset holds at most {IMAGE_SOURCE_BYTES} bytes (10 MiB)")
