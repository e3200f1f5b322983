"""
A batch's input file as bytes: JSONL written from records, a JSONL file read from a path, or bytes
given as they are. Records get the client's default model where they name none, as real-time
requests do; a file or bytes are sent unchanged. The bounds the service publishes on every batch
(25 MiB, 10,000 records) are checked here, so a file that cannot be accepted is refused before
anything is uploaded; everything else is the service's to check.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TypeAlias

from ._constants import BULK_FILE_BYTES, BULK_FILE_RECORDS
from ._errors import InputError
from ._questions import InputRecord
from ._transport import encode_json

BatchInput: TypeAlias = "Iterable[InputRecord] | str | os.PathLike[str] | bytes"
"""Records, the path of a JSONL file, or the file's bytes."""


def encode_input(source: BatchInput, default_model: str) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    elif isinstance(source, (str, os.PathLike)):
        try:
            data = Path(source).read_bytes()
        except OSError as err:
            raise InputError(f"cannot read the batch file {os.fspath(source)}: {err.strerror or err}") from None
    else:
        data = _encode_records(source, default_model)
    if not data:
        raise InputError("the batch file is empty")
    if len(data) > BULK_FILE_BYTES:
        raise InputError(f"the batch file is {len(data)} bytes; a batch holds at most {BULK_FILE_BYTES} bytes")
    return data


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
