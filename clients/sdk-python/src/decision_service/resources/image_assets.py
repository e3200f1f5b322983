"""
`client.image_assets`: still photos (JPEG or PNG, at most 10 MiB) uploaded once, checked and made
canonical by the service, then named by their id in image decisions. `upload` does it in one call:

    asset = client.image_assets.upload("cat.jpg")
    asset.status                  # "ready"
    asset.canonical               # CanonicalImage(width=..., height=..., bytes=..., sha256=...)

It creates the asset (declaring the file's size and SHA-256), PUTs the file to the signed storage
address the create answer names with exactly its headers (no credential of the client goes there),
and completes it; a refused image raises ImageRefusedError naming why (`err.code`).

These routes take either credential, as the deployment allows (IMAGE_API=on for API keys,
IMAGE_BROWSER=on for access tokens): the client's API key when it has one, else its access token.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote

from .._constants import IMAGE_FILENAME_CHARS, IMAGE_FILENAME_PATTERN, IMAGE_PURPOSES, IMAGE_SHA256_PATTERN, IMAGE_SOURCE_BYTES
from .._errors import APIError, InputError
from .._input import ImageInput, read_image
from .._models import ImageAsset, ImagePurpose, Upload, UploadResult
from .._settings import Credential
from .._transport import AsyncTransport, Call, SyncTransport, encode_json, read

_CREDENTIALS: tuple[Credential, ...] = ("api_key", "access_token")
"""Either credential: the API key when the client has one, else the signed-in user's access token."""

_FILENAME = re.compile(IMAGE_FILENAME_PATTERN)
_SHA256 = re.compile(IMAGE_SHA256_PATTERN)


def _completion_retried(err: APIError) -> bool:
    # A completion is safe to repeat (one finalization under a lease): retried after 503, and while
    # another completion holds the lease (409 asset_finalizing), waiting the retry-after it names.
    return err.status == 503 or (err.status == 409 and err.code == "asset_finalizing")


def _path(asset_id: str) -> str:
    if not isinstance(asset_id, str) or not asset_id:
        raise InputError("an image asset id is a non-empty string")
    return f"/v1/image-assets/{quote(asset_id, safe='')}"


def _create_call(purpose: ImagePurpose, filename: str, source_bytes: int, sha256: str) -> Call:
    """The create request, checked with the contract's rules (InputError, before anything is sent)."""
    if purpose not in IMAGE_PURPOSES:
        raise InputError(f"purpose must be one of {', '.join(map(repr, IMAGE_PURPOSES))}, not {purpose!r}")
    if not isinstance(filename, str) or not filename:
        raise InputError("filename must not be empty")
    try:
        # The service counts UTF-16 code units, as JavaScript strings do.
        units = len(filename.encode("utf-16-le")) // 2
    except UnicodeEncodeError:
        raise InputError("filename must be text (it has a lone surrogate)") from None
    if units > IMAGE_FILENAME_CHARS:
        raise InputError(f"filename must be at most {IMAGE_FILENAME_CHARS} characters")
    if not _FILENAME.fullmatch(filename):
        raise InputError("filename must be a name (no path, no control character) ending in .jpg, .jpeg or .png: one still JPEG or PNG")
    if isinstance(source_bytes, bool) or not isinstance(source_bytes, int) or not 1 <= source_bytes <= IMAGE_SOURCE_BYTES:
        raise InputError(f"source_bytes must be an integer from 1 to {IMAGE_SOURCE_BYTES} (10 MiB)")
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256):
        raise InputError("sha256 must be the file's SHA-256 as 64 hex digits")
    body = {"purpose": purpose, "filename": filename, "source_bytes": source_bytes, "sha256": sha256.lower()}
    return Call("POST", path="/v1/image-assets", body=encode_json(body), credential=_CREDENTIALS)


def _prepare_upload(file: ImageInput, filename: str | None, purpose: ImagePurpose) -> tuple[Call, bytes]:
    """The photo's bytes and the create request that declares them; InputError before anything is sent."""
    data, own_name = read_image(file)
    name = filename if filename is not None else own_name
    if name is None:
        raise InputError("image_assets.upload needs filename= for bytes or a file object without a name: the name shown for the asset, ending in .jpg, .jpeg or .png")
    return _create_call(purpose, name, len(data), hashlib.sha256(data).hexdigest()), data


def _upload_call(created: ImageAsset, data: bytes) -> Call:
    upload: Upload | None = created.upload
    if upload is None:
        raise APIError("the service created the image asset without an upload destination", request_id=created.request_id)
    return Call("PUT", url=upload.url, headers=upload.headers, body=data, json_body=False)


def _complete_call(asset_id: str) -> Call:
    return Call("POST", path=f"{_path(asset_id)}/complete", body=b"{}", credential=_CREDENTIALS, retry_also=_completion_retried)


def _retrieve_call(asset_id: str) -> Call:
    return Call("GET", path=_path(asset_id), credential=_CREDENTIALS)


class ImageAssets:
    def __init__(self, transport: SyncTransport) -> None:
        self._transport = transport

    def upload(
        self,
        file: ImageInput,
        *,
        filename: str | None = None,
        purpose: ImagePurpose = "prediction",
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> ImageAsset:
        """
        Uploads a photo as an asset in one call: reads it, computes its size and SHA-256, creates the
        asset, PUTs the file to its signed address with exactly the returned headers, completes it,
        and returns the ready asset. `file` is the path of a JPEG or PNG file, its bytes, or a binary
        file object; `filename` (the name shown, ending in .jpg, .jpeg or .png as the file is) is the
        path's or file object's own name when None, and required for bytes. InputError before
        anything is sent for input the service cannot accept (over 10 MiB, empty, no filename,
        another extension); ImageRefusedError, with the refusal's `code`, when the service refuses
        the image. `max_retries` bounds the completion's retries (see `complete`).

            asset = client.image_assets.upload("photos/cat.jpg")
            training_photo = client.image_assets.upload(data, filename="cat.png", purpose="training")
        """
        create, data = _prepare_upload(file, filename, purpose)
        created = read(ImageAsset, self._transport.request(create, timeout=timeout))
        read(UploadResult, self._transport.request(_upload_call(created, data), timeout=timeout))
        return self.complete(created.id, timeout=timeout, max_retries=max_retries)

    def create(
        self,
        *,
        filename: str,
        source_bytes: int,
        sha256: str,
        purpose: ImagePurpose = "prediction",
        timeout: float | None = None,
    ) -> ImageAsset:
        """
        Creates an asset for a file of this size and SHA-256 (hex), with its signed `upload`
        destination: PUT the file there with exactly `upload.headers`, then `complete(asset.id)`.
        InputError, naming the field, for a request the service would refuse, before it is sent.

            asset = client.image_assets.create(filename="cat.jpg", source_bytes=48213, sha256=digest)
            asset.upload.url, asset.upload.headers
        """
        return read(ImageAsset, self._transport.request(_create_call(purpose, filename, source_bytes, sha256), timeout=timeout))

    def complete(self, asset_id: str, *, timeout: float | None = None, max_retries: int | None = None) -> ImageAsset:
        """
        Completes an uploaded asset: the service checks the upload and the image and makes its
        canonical PNG. Returns the ready asset (again, unchanged, when repeated); ImageRefusedError
        for a refused image (every later completion too). Retried after 503 and while another
        completion runs (409 `asset_finalizing`), waiting what the service asks, at most
        `max_retries` times (the client's when None).

            ready = client.image_assets.complete(asset.id)
        """
        return read(ImageAsset, self._transport.request(_complete_call(asset_id), timeout=timeout, max_retries=max_retries))

    def retrieve(self, asset_id: str, *, timeout: float | None = None) -> ImageAsset:
        """
        The asset: its status (uploading, ready or rejected), the original's format and size once
        ready, its canonical image, and why it was refused. Another account's, an unknown and an
        expired asset are the same NotFoundError.
        """
        return read(ImageAsset, self._transport.request(_retrieve_call(asset_id), timeout=timeout))


class AsyncImageAssets:
    def __init__(self, transport: AsyncTransport) -> None:
        self._transport = transport

    async def upload(
        self,
        file: ImageInput,
        *,
        filename: str | None = None,
        purpose: ImagePurpose = "prediction",
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> ImageAsset:
        """Uploads a photo as an asset in one call; see `ImageAssets.upload`."""
        create, data = _prepare_upload(file, filename, purpose)
        created = read(ImageAsset, await self._transport.request(create, timeout=timeout))
        read(UploadResult, await self._transport.request(_upload_call(created, data), timeout=timeout))
        return await self.complete(created.id, timeout=timeout, max_retries=max_retries)

    async def create(
        self,
        *,
        filename: str,
        source_bytes: int,
        sha256: str,
        purpose: ImagePurpose = "prediction",
        timeout: float | None = None,
    ) -> ImageAsset:
        """Creates an asset with its signed upload destination; see `ImageAssets.create`."""
        return read(ImageAsset, await self._transport.request(_create_call(purpose, filename, source_bytes, sha256), timeout=timeout))

    async def complete(self, asset_id: str, *, timeout: float | None = None, max_retries: int | None = None) -> ImageAsset:
        """Completes an uploaded asset; see `ImageAssets.complete`."""
        return read(ImageAsset, await self._transport.request(_complete_call(asset_id), timeout=timeout, max_retries=max_retries))

    async def retrieve(self, asset_id: str, *, timeout: float | None = None) -> ImageAsset:
        """The asset; see `ImageAssets.retrieve`."""
        return read(ImageAsset, await self._transport.request(_retrieve_call(asset_id), timeout=timeout))
