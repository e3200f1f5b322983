"""
The SDK's models against the wire contract, so the two cannot drift: every field name, whether it
is required, whether it may be null, and its type, for every class that reads a service answer.

The contract's JSON Schema comes from the service itself (`GET /v1/openapi.json`, components named
like the contract's exports) when it serves one, and from the dump of the contract's zod schemas
that test/python-sdk.test.ts writes (`SVC_TEST_CONTRACT`); each source present is checked. A body
the OpenAPI document has no component for (the trainings' answers) is read from its route's
response there. The dump also carries the contract's constants, which the SDK's copies must equal,
and the rules of the one request the SDK checks field by field before sending (an image asset's
creation), which the SDK's copies must equal too, and the fields of a key's and of a webhook
endpoint's creation, which are `keys.create`'s and `webhooks.create`'s arguments. What a webhook
endpoint receives (`WebhookEvent`) is no route's answer: only the dump has it.
"""

from __future__ import annotations

import inspect
import json
import os
import types
import typing
from typing import Annotated, Any, Literal, Union

import httpx
import pydantic
import pytest

import decision_service as sdk
from decision_service.resources.keys import AsyncKeys, Keys
from decision_service.resources.webhooks import AsyncWebhooks, Webhooks

from .conftest import STACK

Schema = dict[str, Any]

# Each SDK class that reads a whole answer, and the contract export it reads.
ROOTS: dict[type[Any], str] = {
    sdk.DecisionResponse: "DecisionResponse",
    sdk.ModelList: "ModelList",
    sdk.Batch: "Batch",
    sdk.BatchList: "BatchList",
    sdk.ResultsPage: "ResultsPage",
    sdk.Training: "Training",
    sdk.TrainingList: "TrainingList",
    sdk.EvaluationReport: "EvaluationReport",
    sdk.LabelIssueList: "LabelIssueList",
    sdk.RetiredModel: "RetiredModel",
    sdk.ImageAsset: "ImageAsset",
    sdk.ImageModelList: "ImageModelList",
    sdk.CreditBalance: "CreditBalance",
    # The contract's `Usage` of GET /v1/usage (contract/usage.ts), which the SDK names apart from a decision's `Usage`.
    sdk.UsageReport: "UsageReport",
    sdk.CreatedKey: "CreatedKey",
    sdk.KeyList: "KeyList",
    sdk.KeyMetadata: "KeyMetadata",
    sdk.WebhookEndpoint: "WebhookEndpoint",
    sdk.WebhookEndpointWithSecret: "WebhookEndpointWithSecret",
    sdk.WebhookEndpointList: "WebhookEndpointList",
    sdk.DeletedWebhookEndpoint: "DeletedWebhookEndpoint",
    sdk.WebhookDeliveryList: "WebhookDeliveryList",
    # The body of a delivery, which `webhooks.verify` reads: no route answers it.
    sdk.WebhookEvent: "WebhookEvent",
}
# Where the OpenAPI document gives a root it has no component for: its route's success response.
ROUTE_BODIES: dict[str, tuple[str, str, str]] = {
    "Training": ("/v1/trainings/{id}", "get", "200"),
    "TrainingList": ("/v1/trainings", "get", "200"),
    "EvaluationReport": ("/v1/trainings/{id}/report", "get", "200"),
    "LabelIssueList": ("/v1/trainings/{id}/label_issues", "get", "200"),
    "RetiredModel": ("/v1/models/{model}/retire", "post", "200"),
    "UsageReport": ("/v1/usage", "get", "200"),
    "WebhookEndpointWithSecret": ("/v1/webhooks", "post", "201"),
    "WebhookEndpointList": ("/v1/webhooks", "get", "200"),
    "WebhookEndpoint": ("/v1/webhooks/{id}", "get", "200"),
    "DeletedWebhookEndpoint": ("/v1/webhooks/{id}", "delete", "200"),
    "WebhookDeliveryList": ("/v1/webhooks/{id}/deliveries", "get", "200"),
}
# Roots no route answers, which only the contract dump has (the OpenAPI document describes routes),
# and the classes only they reach.
NOT_IN_ROUTES: dict[str, set[type[Any]]] = {"WebhookEvent": {sdk.WebhookEvent, sdk.WebhookEventData}}
# Classes of the service's answers that are not in the contract: storage's answer to an upload.
NOT_IN_CONTRACT = {sdk.UploadResult}


def _sources() -> list[tuple[str, Schema]]:
    found: list[tuple[str, Schema]] = []
    if STACK is not None:
        try:
            served = httpx.get(f"{STACK.base_url}/v1/openapi.json", timeout=10)
        except httpx.HTTPError:
            served = None
        if served is not None and served.status_code == 200:
            found.append(("served /v1/openapi.json", served.json()))
    dumped = os.environ.get("SVC_TEST_CONTRACT")
    if dumped:
        with open(dumped, encoding="utf-8") as file:
            found.append(("contract dump", json.load(file)))
    return found


SOURCES = _sources()


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def _plain(hint: Any) -> Any:
    """The type of an `Annotated` hint (the SDK annotates the answers' union with its discriminator)."""
    return typing.get_args(hint)[0] if typing.get_origin(hint) is Annotated else hint


def _components(document: Schema) -> dict[str, Schema]:
    components = document.get("components", {}).get("schemas", {})
    assert isinstance(components, dict)
    return components


def _root(document: Schema, name: str) -> Schema | None:
    """The contract export `name`: its component, else the body of the route that answers it."""
    components = _components(document)
    if name in components:
        found: Schema = components[name]
        return found
    if name not in ROUTE_BODIES:
        return None
    path, method, status = ROUTE_BODIES[name]
    try:
        body: Schema = document["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
    except KeyError:
        return None
    return body


class Checker:
    def __init__(self, document: Schema) -> None:
        self.components = _components(document)
        self.errors: list[str] = []
        self.visited: set[type[Any]] = set()

    def resolve(self, schema: Schema, root: Schema) -> tuple[Schema, Schema]:
        """The schema a `$ref` points at (components, or the `$defs` of the schema it is in), and its root."""
        while "$ref" in schema:
            ref = schema["$ref"]
            if ref.startswith("#/components/schemas/"):
                root = self.components[ref.rsplit("/", 1)[1]]
                schema = root
            elif ref.startswith("#/$defs/"):
                schema = root["$defs"][ref.rsplit("/", 1)[1]]
            elif ref == "#":
                schema = root
            else:
                raise AssertionError(f"unknown $ref {ref}")
        return schema, root

    def component(self, cls: type[Any]) -> Schema | None:
        return self.components.get(cls.__name__)

    def check_class(self, cls: type[Any], schema: Schema, root: Schema, where: str) -> None:
        schema, root = self.resolve(schema, root)
        if not schema.get("properties"):
            # A shape JSON Schema cannot express here (an ordered map in zod): the export of the same name, when there is one.
            named = self.component(cls)
            if named is None or named is schema:
                return
            schema, root = named, named
        self.visited.add(cls)
        properties: dict[str, Schema] = schema["properties"]
        required = set(schema.get("required", []))
        fields = cls.model_fields
        if set(fields) != set(properties):
            self.errors.append(f"{where}: SDK fields {sorted(fields)} != contract fields {sorted(properties)}")
        for name, f in fields.items():
            if name not in properties:
                continue
            sdk_required = f.is_required()
            if sdk_required != (name in required):
                self.errors.append(f"{where}.{name}: {'required' if sdk_required else 'optional'} in the SDK, not in the contract")
            self.check_type(f.annotation, properties[name], root, f"{where}.{name}", check_null=sdk_required)

    def check_type(self, hint: Any, schema: Schema, root: Schema, where: str, check_null: bool = True) -> None:
        schema, root = self.resolve(schema, root)
        schema, nullable = self.strip_null(schema, root)
        hint = _plain(hint)
        options = typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else (hint,)
        hint_nullable = type(None) in options
        options = tuple(o for o in options if o is not type(None))
        if hint is sdk.JsonValue or (len(options) > 1 and not all(_is_model(o) for o in options)):
            return  # JsonValue: any JSON, null included
        if check_null and hint_nullable != nullable:
            self.errors.append(f"{where}: {'nullable' if hint_nullable else 'not nullable'} in the SDK, not in the contract")
        if len(options) > 1:
            self.check_union(options, schema, root, where)
            return
        (base,) = options
        origin = typing.get_origin(base)
        if schema == {}:
            if _is_model(base):
                self.check_class(base, schema, root, where)
            elif origin is dict:
                self.check_map_values(typing.get_args(base)[1], where)
            return  # unrepresentable in JSON Schema: nothing more to compare
        if origin is Literal:
            allowed = set(schema["enum"]) if "enum" in schema else {schema.get("const")}
            if allowed != set(typing.get_args(base)):
                self.errors.append(f"{where}: SDK values {sorted(typing.get_args(base))} != contract values {sorted(allowed, key=str)}")
        elif origin is list:
            self.expect(schema, "array", where)
            self.check_type(typing.get_args(base)[0], schema.get("items", {}), root, f"{where}[]")
        elif origin is dict:
            self.expect(schema, "object", where)
            values = schema.get("additionalProperties")
            if isinstance(values, dict):
                self.check_type(typing.get_args(base)[1], values, root, f"{where}{{}}")
        elif _is_model(base):
            self.expect(schema, "object", where)
            self.check_class(base, schema, root, where)
        else:
            wanted = {str: "string", int: "integer", float: "number", bool: "boolean"}[base]
            self.expect(schema, wanted, where)

    def check_union(self, options: tuple[Any, ...], schema: Schema, root: Schema, where: str) -> None:
        """A union of classes: each matches the branch of the contract with its field names."""
        listed: list[Schema] = schema.get("anyOf") or schema.get("oneOf") or []
        branches = [self.resolve(b, root) for b in listed]
        for cls in options:
            names = set(cls.model_fields)
            match = [(b, r) for b, r in branches if set(b.get("properties", {})) == names]
            if match:
                self.check_class(cls, match[0][0], match[0][1], f"{where}<{cls.__name__}>")
            elif self.component(cls) is not None:
                named = self.component(cls)
                assert named is not None
                self.check_class(cls, named, named, f"{where}<{cls.__name__}>")
            elif branches:
                self.errors.append(f"{where}: no contract branch has the fields of {cls.__name__} {sorted(names)}")

    def check_map_values(self, value_hint: Any, where: str) -> None:
        value_hint = _plain(value_hint)
        options = typing.get_args(value_hint) if typing.get_origin(value_hint) in (Union, types.UnionType) else (value_hint,)
        for cls in options:
            named = self.component(cls) if isinstance(cls, type) else None
            if named is not None:
                self.check_class(cls, named, named, f"{where}{{}}<{cls.__name__}>")

    def strip_null(self, schema: Schema, root: Schema) -> tuple[Schema, bool]:
        for key in ("anyOf", "oneOf"):
            if key in schema:
                rest = [b for b in schema[key] if self.resolve(b, root)[0].get("type") != "null"]
                if len(rest) < len(schema[key]):
                    return (rest[0] if len(rest) == 1 else {key: rest}), True
        kind = schema.get("type")
        if isinstance(kind, list) and "null" in kind:
            others = [k for k in kind if k != "null"]
            return {**schema, "type": others[0] if len(others) == 1 else others}, True
        return schema, False

    def expect(self, schema: Schema, kind: str, where: str) -> None:
        if schema.get("type") != kind:
            self.errors.append(f"{where}: {kind} in the SDK, {schema.get('type', schema)} in the contract")


@pytest.mark.parametrize(("source", "document"), SOURCES, ids=[s for s, _ in SOURCES])
def test_the_sdks_models_match_the_contracts_json_schema(source: str, document: Schema) -> None:
    checker = Checker(document)
    not_here: set[type[Any]] = set()
    for cls, name in ROOTS.items():
        root = _root(document, name)
        if root is None and name in NOT_IN_ROUTES and source != "contract dump":
            not_here |= NOT_IN_ROUTES[name]
            continue
        assert root is not None, f"{source} has no schema {name}"
        checker.check_class(cls, root, root, name)
    assert checker.errors == [], f"the SDK's models differ from the contract ({source}):\n" + "\n".join(checker.errors)
    models = {v for v in vars(sdk._models).values() if _is_model(v) and not v.__name__.startswith("_")}
    unchecked = models - checker.visited - NOT_IN_CONTRACT - not_here
    assert unchecked == set(), f"{source} never reached {sorted(c.__name__ for c in unchecked)}"


@pytest.mark.parametrize(("source", "document"), SOURCES, ids=[s for s, _ in SOURCES])
def test_an_image_asset_is_created_with_the_contracts_rules(source: str, document: Schema) -> None:
    # What the SDK checks before sending (InputError) is what the service accepts, field by field.
    from decision_service import _constants

    request = _components(document).get("CreateImageAssetRequest")
    assert request is not None, f"{source} has no schema CreateImageAssetRequest"
    fields = request["properties"]
    assert sorted(fields) == sorted(request["required"]) == ["filename", "purpose", "sha256", "source_bytes"]
    assert fields["purpose"]["enum"] == list(sdk.IMAGE_PURPOSES)
    assert (fields["filename"]["minLength"], fields["filename"]["maxLength"]) == (1, _constants.IMAGE_FILENAME_CHARS)
    assert fields["filename"]["pattern"] == _constants.IMAGE_FILENAME_PATTERN
    assert (fields["source_bytes"]["minimum"], fields["source_bytes"]["maximum"]) == (1, sdk.IMAGE_SOURCE_BYTES)
    assert fields["sha256"]["pattern"] == _constants.IMAGE_SHA256_PATTERN


@pytest.mark.parametrize(("source", "document"), SOURCES, ids=[s for s, _ in SOURCES])
def test_a_key_is_created_with_the_fields_the_sdk_sends(source: str, document: Schema) -> None:
    # keys.create's keyword arguments are the request's fields (the service refuses any other), scope its values.
    request = _components(document).get("CreateKeyRequest")
    assert request is not None, f"{source} has no schema CreateKeyRequest"
    fields = request["properties"]
    assert sorted(fields) == ["expires_at", "models", "name", "scope"]
    assert request["required"] == ["name"]
    for resource in (Keys, AsyncKeys):
        sent = [name for name in inspect.signature(resource.create).parameters if name not in ("self", "timeout")]
        assert sorted(sent) == sorted(fields), resource.__name__
    assert fields["scope"]["enum"] == list(sdk.KEY_SCOPES) == list(typing.get_args(sdk.KeyScope))
    assert fields["models"]["maxItems"] == sdk.KEY_MODELS_MAX


@pytest.mark.parametrize(("source", "document"), SOURCES, ids=[s for s, _ in SOURCES])
def test_a_webhook_endpoint_is_created_with_the_fields_the_sdk_sends(source: str, document: Schema) -> None:
    # webhooks.create's keyword arguments are the request's fields, events its values.
    request = _components(document).get("CreateWebhookRequest")
    if request is None and source != "contract dump":
        path = document.get("paths", {}).get("/v1/webhooks", {}).get("post")
        assert path is not None, f"{source} has no POST /v1/webhooks"
        request, _ = Checker(document).resolve(path["requestBody"]["content"]["application/json"]["schema"], {})
    assert request is not None, f"{source} has no schema CreateWebhookRequest"
    fields = request["properties"]
    assert sorted(fields) == ["description", "events", "url"]
    assert sorted(request["required"]) == ["events", "url"]
    for resource in (Webhooks, AsyncWebhooks):
        sent = [name for name in inspect.signature(resource.create).parameters if name not in ("self", "timeout")]
        assert sorted(sent) == sorted(fields), resource.__name__
    assert fields["events"]["items"]["enum"] == list(sdk.WEBHOOK_EVENTS) == list(typing.get_args(sdk.WebhookEventType))


@pytest.mark.parametrize(("source", "document"), SOURCES, ids=[s for s, _ in SOURCES])
def test_the_error_envelope_has_what_the_sdk_reads(source: str, document: Schema) -> None:
    envelope = _components(document)["ErrorEnvelope"]
    checker = Checker(document)
    error, _ = checker.resolve(envelope["properties"]["error"], envelope)
    assert {"code", "message", "status"} <= set(error["required"])
    assert [error["properties"][k]["type"] for k in ("code", "message", "status")] == ["string", "string", "integer"]


def test_the_sdks_constants_are_the_contracts() -> None:
    dumped = os.environ.get("SVC_TEST_CONTRACT")
    if not dumped:
        pytest.skip("needs SVC_TEST_CONTRACT, the contract dump test/python-sdk.test.ts writes")
    with open(dumped, encoding="utf-8") as file:
        constants = json.load(file)["constants"]
    assert sdk.SHARED_ALIAS == constants["SHARED_ALIAS"]
    assert sdk.REQUEST_ID_HEADER == constants["REQUEST_ID_HEADER"]
    assert sdk.DEFAULT_TIMEOUT * 1000 == constants["toolRequestTimeoutMs"]
    assert sdk.MAX_CONNECTIONS == constants["httpConnectionsPerService"]
    assert list(sdk.BATCH_STATUSES) == constants["BATCH_STATUSES"]
    assert list(sdk.TERMINAL_STATUSES) == constants["TERMINAL_STATUSES"]
    assert list(typing.get_args(sdk.BatchStatus)) == constants["BATCH_STATUSES"]
    assert list(sdk.TRAINING_STATUSES) == constants["TRAINING_STATUSES"]
    assert list(sdk.TRAINING_TERMINAL_STATUSES) == constants["TRAINING_TERMINAL_STATUSES"]
    assert list(typing.get_args(sdk.TrainingStatus)) == constants["TRAINING_STATUSES"]
    from decision_service import _constants

    assert _constants.BULK_FILE_BYTES == constants["bulkFileBytes"]
    assert _constants.BULK_FILE_RECORDS == constants["bulkFileRecords"]
    assert _constants.BATCH_LIST_PAGE_DEFAULT == constants["batchListPageDefault"]
    assert _constants.TRAINING_FILE_BYTES == constants["trainingFileBytes"]
    assert _constants.TRAINING_FILE_EXAMPLES == constants["trainingFileExamples"]
    assert _constants.TRAINING_LIST_PAGE_DEFAULT == constants["trainingListPageDefault"]
    assert sdk.IMAGE_SOURCE_BYTES == constants["imageSourceBytes"]
    assert _constants.IMAGE_FILENAME_CHARS == constants["imageFilenameChars"]
    assert list(sdk.IMAGE_PURPOSES) == constants["IMAGE_PURPOSES"] == list(typing.get_args(sdk.ImagePurpose))
    assert list(sdk.IMAGE_ASSET_STATUSES) == constants["IMAGE_ASSET_STATUSES"] == list(typing.get_args(sdk.ImageAssetStatus))
    assert sdk.IMAGE_REFUSALS == constants["IMAGE_REFUSALS"]
    assert list(typing.get_args(sdk.ImageRefusal)) == list(constants["IMAGE_REFUSALS"])
    assert sdk.IMAGE_BASE_ALIAS == constants["IMAGE_BASE_ALIAS"]
    assert list(sdk.IMAGE_MODEL_STATES) == constants["IMAGE_MODEL_STATES"] == list(typing.get_args(sdk.ImageModelState))
    assert list(sdk.KEY_SCOPES) == constants["KEY_SCOPES"] == list(typing.get_args(sdk.KeyScope))
    assert sdk.KEY_MODELS_MAX == constants["KEY_MODELS_MAX"]
    assert list(sdk.WEBHOOK_EVENTS) == constants["WEBHOOK_EVENTS"] == list(typing.get_args(sdk.WebhookEventType))
    assert list(sdk.WEBHOOK_DELIVERY_STATUSES) == constants["WEBHOOK_DELIVERY_STATUSES"] == list(typing.get_args(sdk.WebhookDeliveryStatus))
    assert sdk.WEBHOOK_ENDPOINTS_MAX == constants["webhookEndpoints"]
    assert sdk.WEBHOOK_TOLERANCE_SECONDS == constants["WEBHOOK_TOLERANCE_SECONDS"]
    assert {"pairs": sdk.METADATA_PAIRS_MAX, "keyChars": sdk.METADATA_KEY_CHARS, "valueChars": sdk.METADATA_VALUE_CHARS} == constants["METADATA_LIMITS"]


def test_there_is_a_contract_to_compare_with_when_the_service_is_there() -> None:
    if STACK is None:
        pytest.skip("needs the running service: set SVC_BASE_URL and SVC_API_KEY")
    assert SOURCES, "neither GET /v1/openapi.json nor SVC_TEST_CONTRACT gave the contract's JSON Schema"
