"""
client.image_assets: one-call uploads of photos the suite's test/python-sdk.test.ts wrote with sharp
(SVC_TEST_IMAGE_DIR) against the real stack, sync and async, each refusal the stack gives as an
ImageRefusedError, input refused before any request, and, against the named recording fake, which
credential goes where and the retries of a completion (a lease held for a minute is not waited out here).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest

from decision_service import (
    IMAGE_REFUSALS,
    IMAGE_SOURCE_BYTES,
    APIError,
    AsyncClient,
    Client,
    ConflictError,
    ImageAsset,
    ImageRefusal,
    ImageRefusedError,
    InputError,
    NotFoundError,
    ServiceUnavailableError,
    UnprocessableEntityError,
)

from .conftest import Stack, remember_upload, require
from .fakes import FakeServiceAnswering, FakeServiceRecording

ASSET_ID = "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b"
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"


def photos(stack: Stack) -> Path:
    return Path(require(stack.image_dir, "SVC_TEST_IMAGE_DIR"))


def asset_body(status: str = "ready", **changes: Any) -> dict[str, Any]:
    """An image asset as the service answers it."""
    body: dict[str, Any] = {
        "id": ASSET_ID,
        "object": "image_asset",
        "purpose": "prediction",
        "status": status,
        "filename": "cat.jpg",
        "source_bytes": 4,
        "sha256": hashlib.sha256(b"\xff\xd8\xff\xd9").hexdigest(),
        "created_at": "2026-11-22T10:00:00.000Z",
        "expires_at": "2026-11-23T10:00:00.000Z",
        "source": {"format": "jpeg", "width": 2, "height": 1} if status == "ready" else None,
        "canonical": {"width": 2, "height": 1, "bytes": 70, "sha256": "a" * 64} if status == "ready" else None,
        "error": None,
    }
    return {**body, **changes}


def finalizing() -> tuple[int, object]:
    """Another completion holds the asset's lease (the service adds its retry-after)."""
    return 409, {"error": {"code": "asset_finalizing", "message": "this asset is being completed by another request", "status": 409}}


@pytest.fixture
def exchanges(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[httpx.Request, httpx.Response]]]:
    """Every request any sync client sends during the test, with its response."""
    seen: list[tuple[httpx.Request, httpx.Response]] = []
    send = httpx.Client.send

    def recording(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        response = send(self, request, **kwargs)
        seen.append((request, response))
        return response

    monkeypatch.setattr(httpx.Client, "send", recording)
    yield seen


def test_upload_a_jpeg_file_in_one_call_create_then_the_put_with_its_headers_and_no_credential_then_complete(
    client: Client, stack: Stack, exchanges: list[tuple[httpx.Request, httpx.Response]]
) -> None:
    path = photos(stack) / "photo.jpg"
    data = path.read_bytes()
    asset = client.image_assets.upload(path)
    assert (asset.object, asset.status, asset.purpose, asset.filename) == ("image_asset", "ready", "prediction", "photo.jpg")
    assert (asset.source_bytes, asset.sha256, asset.error, asset.upload) == (len(data), hashlib.sha256(data).hexdigest(), None, None)
    assert asset.source is not None and (asset.source.format, asset.source.width, asset.source.height) == ("jpeg", 320, 240)
    assert asset.canonical is not None and (asset.canonical.width, asset.canonical.height) == (320, 240)
    assert asset.request_id is not None and asset.request_id.startswith("req_")

    assert [(r.method, res.status_code) for r, res in exchanges] == [("POST", 201), ("PUT", 200), ("POST", 200)]
    (create, created), (put, _), (complete, _) = exchanges
    assert str(create.url) == f"{stack.base_url}/v1/image-assets"
    assert str(complete.url) == f"{stack.base_url}/v1/image-assets/{asset.id}/complete"
    for request in (create, complete):
        assert request.headers["authorization"] == f"Bearer {stack.api_key}"
    # The PUT goes to the signed storage address, with exactly the headers the create answer gave, and no credential.
    upload = created.json()["upload"]
    remember_upload(str(put.url))
    assert str(put.url) == upload["url"]
    assert not put.url.path.startswith("/v1/")
    assert "authorization" not in put.headers
    assert upload["headers"] == {
        "content-length": str(len(data)),
        "if-none-match": "*",
        "x-amz-checksum-sha256": base64.b64encode(hashlib.sha256(data).digest()).decode(),
    }
    assert {name: put.headers[name] for name in upload["headers"]} == upload["headers"]
    assert put.content == data

    assert client.image_assets.retrieve(asset.id) == asset
    # Completing again changes nothing.
    assert client.image_assets.complete(asset.id) == asset


def test_the_async_client_uploads_bytes_and_a_file_object_and_a_client_with_only_an_access_token_uses_it(stack: Stack) -> None:
    token = require(stack.access_token, "SVC_TEST_ACCESS_TOKEN")
    png = (photos(stack) / "photo.png").read_bytes()

    async def scenario() -> tuple[ImageAsset, ImageAsset]:
        async with AsyncClient(access_token=token, base_url=stack.base_url) as client:
            from_bytes = await client.image_assets.upload(png, filename="diagram.PNG", purpose="training")
            with open(photos(stack) / "photo.jpg", "rb") as file:
                from_file = await client.image_assets.upload(file)
            assert await client.image_assets.retrieve(from_file.id) == from_file
            return from_bytes, from_file

    from_bytes, from_file = asyncio.run(scenario())
    assert (from_bytes.status, from_bytes.purpose, from_bytes.filename) == ("ready", "training", "diagram.PNG")
    assert from_bytes.source is not None and (from_bytes.source.format, from_bytes.source.width, from_bytes.source.height) == ("png", 40, 30)
    assert (from_file.status, from_file.filename) == ("ready", "photo.jpg")
    # The same account's assets, whichever credential reads them.
    with Client(api_key=stack.api_key, base_url=stack.base_url) as keyed:
        assert keyed.image_assets.retrieve(from_bytes.id).id == from_bytes.id


@pytest.mark.parametrize(
    ("name", "code"),
    [("a PNG named .jpg", "image_type_mismatch"), ("a truncated JPEG", "image_truncated")],
)
def test_a_refused_image_raises_an_image_refused_error_with_the_refusals_code(client: Client, stack: Stack, name: str, code: str) -> None:
    jpeg = (photos(stack) / "photo.jpg").read_bytes()
    png = (photos(stack) / "photo.png").read_bytes()
    data, filename = (png, "renamed.jpg") if code == "image_type_mismatch" else (jpeg[:6000], "cut.jpg")
    with pytest.raises(ImageRefusedError) as refused:
        client.image_assets.upload(data, filename=filename)
    err = refused.value
    assert isinstance(err, UnprocessableEntityError) and isinstance(err, APIError)
    assert (err.status, err.code) == (422, code), name
    assert err.message and err.request_id is not None
    assert err.code in IMAGE_REFUSALS


def test_the_async_client_raises_the_same_refusal_and_other_422s_keep_their_class(client: Client, stack: Stack) -> None:
    png = (photos(stack) / "photo.png").read_bytes()

    async def refused() -> ImageRefusedError:
        async with AsyncClient(api_key=stack.api_key, base_url=stack.base_url) as async_client:
            with pytest.raises(ImageRefusedError) as err:
                await async_client.image_assets.upload(png, filename="renamed.jpeg")
            return err.value

    assert asyncio.run(refused()).code == "image_type_mismatch"
    with pytest.raises(UnprocessableEntityError) as invalid:
        client.system_one(state="s", questions={"q": {"type": "choice", "criteria": {"only": None}}})
    assert not isinstance(invalid.value, ImageRefusedError)


def test_an_asset_not_uploaded_is_a_conflict_at_once_and_unknown_or_other_accounts_assets_are_not_found(
    client: Client, stack: Stack, exchanges: list[tuple[httpx.Request, httpx.Response]]
) -> None:
    data = (photos(stack) / "photo.jpg").read_bytes()
    created = client.image_assets.create(filename="later.jpg", source_bytes=len(data), sha256=hashlib.sha256(data).hexdigest().upper())
    assert created.upload is not None and created.status == "uploading" and created.sha256 == hashlib.sha256(data).hexdigest()
    remember_upload(created.upload.url)
    exchanges.clear()
    with pytest.raises(ConflictError) as early:
        client.image_assets.complete(created.id)
    assert early.value.code == "upload_incomplete"
    assert len(exchanges) == 1
    other_key = require(stack.other_api_key, "SVC_TEST_OTHER_API_KEY")
    with Client(api_key=other_key, base_url=stack.base_url) as other:
        for images, asset_id in ((client.image_assets, UNKNOWN_ID), (other.image_assets, created.id)):
            with pytest.raises(NotFoundError) as missing:
                images.retrieve(asset_id)
            assert missing.value.code == "not_found"
            with pytest.raises(NotFoundError):
                images.complete(asset_id)


def test_input_the_service_cannot_accept_is_refused_before_anything_is_sent(tmp_path: Path, exchanges: list[tuple[httpx.Request, httpx.Response]]) -> None:
    images = Client(api_key="svc_test-key-never-sent", base_url="http://127.0.0.1:9").image_assets
    large = tmp_path / "large.jpg"
    with open(large, "wb") as file:
        file.truncate(IMAGE_SOURCE_BYTES + 1)
    jpeg = b"\xff\xd8\xff\xe0" + bytes(100)
    over = f"{IMAGE_SOURCE_BYTES + 1} bytes; an image asset holds at most {IMAGE_SOURCE_BYTES} bytes (10 MiB)"
    cases: list[tuple[Any, str]] = [
        (lambda: images.upload(bytes(IMAGE_SOURCE_BYTES + 1), filename="big.jpg"), f"the image is {over}"),
        (lambda: images.upload(large), f"large.jpg is {over}"),
        (lambda: images.upload(io.BytesIO(bytes(IMAGE_SOURCE_BYTES + 2)), filename="big.png"), f"is more than {IMAGE_SOURCE_BYTES} bytes"),
        (lambda: images.upload(b"", filename="empty.jpg"), "the image is empty"),
        (lambda: images.upload(jpeg), "needs filename= for bytes"),
        (lambda: images.upload(io.BytesIO(jpeg)), "needs filename="),
        (lambda: images.upload(jpeg, filename="photo.gif"), "filename must be a name (no path, no control character) ending in .jpg, .jpeg or .png"),
        (lambda: images.upload(jpeg, filename="../photo.jpg"), "filename must be a name"),
        (lambda: images.upload(jpeg, filename="photo.jpg\n"), "filename must be a name"),
        (lambda: images.upload(jpeg, filename="a" * 252 + ".jpg"), "filename must be at most 255 characters"),
        (lambda: images.upload(jpeg, filename="a.jpg", purpose="generation"), "purpose must be one of 'prediction', 'training'"),  # type: ignore[arg-type]
        (lambda: images.upload(tmp_path / "missing.jpg"), "cannot read the image"),
        (lambda: images.upload(io.StringIO("text"), filename="a.jpg"), "binary mode"),  # type: ignore[arg-type]
        (lambda: images.create(filename="a.jpg", source_bytes=10, sha256="z" * 64), "sha256 must be the file's SHA-256 as 64 hex digits"),
        (lambda: images.create(filename="a.jpg", source_bytes=0, sha256="a" * 64), "source_bytes must be an integer from 1 to"),
        (lambda: images.retrieve(""), "image asset id is a non-empty string"),
    ]
    for attempt, message in cases:
        with pytest.raises(InputError) as refused:
            attempt()
        assert message in str(refused.value), (message, str(refused.value))
    assert exchanges == []


def test_the_api_key_goes_when_the_client_has_one_else_the_access_token_and_never_to_storage() -> None:
    data = b"\xff\xd8\xff\xd9"
    with FakeServiceRecording() as fake:
        upload = {"url": f"{fake.url}/storage/images/{ASSET_ID}/source?X-Amz-Signature=abc", "method": "PUT", "headers": {"if-none-match": "*", "x-amz-checksum-sha256": "x"}, "expires_at": "2026-11-22T10:15:00.000Z"}
        fake.answers = [(201, asset_body("uploading", upload=upload)), (200, {"key": "k", "size": 4, "etag": "e"}), (200, asset_body()), (200, asset_body())]
        with Client(api_key="svc_the-key", access_token="the-token", base_url=fake.url) as both:
            both.image_assets.upload(data, filename="cat.jpg")
        with Client(access_token="the-token", base_url=fake.url) as token_only:
            token_only.image_assets.retrieve(ASSET_ID)
    assert [(s.method, s.path.split("?")[0]) for s in fake.seen] == [
        ("POST", "/v1/image-assets"),
        ("PUT", f"/storage/images/{ASSET_ID}/source"),
        ("POST", f"/v1/image-assets/{ASSET_ID}/complete"),
        ("GET", f"/v1/image-assets/{ASSET_ID}"),
    ]
    assert [s.headers.get("authorization") for s in fake.seen] == ["Bearer svc_the-key", None, "Bearer svc_the-key", "Bearer the-token"]
    assert fake.seen[0].json() == {"purpose": "prediction", "filename": "cat.jpg", "source_bytes": 4, "sha256": hashlib.sha256(data).hexdigest()}
    put = fake.seen[1]
    assert (put.headers["if-none-match"], put.headers["x-amz-checksum-sha256"], put.body) == ("*", "x", data)
    assert "content-type" not in put.headers


def test_a_completion_is_retried_while_another_runs_waiting_its_retry_after_and_after_503_but_never_a_create() -> None:
    with FakeServiceRecording(finalizing(), finalizing(), (200, asset_body())) as fake:
        fake.headers = {1: {"retry-after-ms": "200"}, 2: {"retry-after": "0.2"}}
        began = time.monotonic()
        ready = Client(api_key="svc_fake", base_url=fake.url).image_assets.complete(ASSET_ID)
        assert ready.status == "ready"
        assert time.monotonic() - began >= 0.4
        assert [s.path for s in fake.seen] == [f"/v1/image-assets/{ASSET_ID}/complete"] * 3
    with FakeServiceRecording(finalizing()) as fake:
        with pytest.raises(ConflictError) as busy:
            Client(api_key="svc_fake", base_url=fake.url).image_assets.complete(ASSET_ID, max_retries=0)
        assert busy.value.code == "asset_finalizing"
    with FakeServiceAnswering(503, {"retry-after-ms": "10"}) as unavailable:
        with pytest.raises(ServiceUnavailableError):
            Client(api_key="svc_fake", base_url=unavailable.url).image_assets.complete(ASSET_ID)
        assert unavailable.requests == 3
        with pytest.raises(ServiceUnavailableError):
            Client(api_key="svc_fake", base_url=unavailable.url, max_retries=5).image_assets.upload(b"\xff\xd8\xff\xd9", filename="a.jpg")
        assert unavailable.requests == 4

        async def scenario() -> None:
            async with AsyncClient(api_key="svc_fake", base_url=unavailable.url) as client:
                with pytest.raises(ServiceUnavailableError):
                    await client.image_assets.complete(ASSET_ID)

        asyncio.run(scenario())
        assert unavailable.requests == 7


def test_the_refusal_codes_are_the_contracts_and_the_error_classes_follow_them() -> None:
    assert set(get_args(ImageRefusal)) == set(IMAGE_REFUSALS)
    assert issubclass(ImageRefusedError, UnprocessableEntityError)
    response = httpx.Response(422, json={"error": {"code": "image_animated", "message": "an animated image", "status": 422}})
    from decision_service._errors import error_from_response

    err = error_from_response(response)
    assert isinstance(err, ImageRefusedError) and err.code == "image_animated"
    for status, code in ((422, "invalid_request"), (422, "upload_mismatch"), (400, "image_truncated")):
        other = error_from_response(httpx.Response(status, json={"error": {"code": code, "message": "m", "status": status}}))
        assert not isinstance(other, ImageRefusedError), code
