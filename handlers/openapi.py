"""The OpenAPI 3.1 document (GET /v1/openapi.json), built from routes() and each API handler's declared
`operations` and the pydantic models in handlers/schemas.py: nothing about the API is written twice."""
import re
from dataclasses import dataclass, field
from typing import Optional

import tornado.web
import tornado.websocket
from pydantic.json_schema import GenerateJsonSchema, models_json_schema

from common.version import VERSION
from handlers.base import ApiHandler, CustomChannelHandler
from handlers.ui_base import UiHandler
from handlers.schemas import ChannelError, ErrorBody
from handlers.webhook_schemas import WEBHOOKS
from services import idempotency

OPENAPI_VERSION = "3.1.0"
REF = "#/components/schemas/{model}"
BINARY = "binary"  # a response body that is the file itself (media), not JSON
CSV = "csv"  # a response body that is a CSV text (exports)


@dataclass(frozen=True)
class Operation:
    """One method of one API handler, as the document shows it.

    responses: 2xx status -> pydantic model (or BINARY); errors: the operation's own error statuses ->
    when they happen. The builder adds what the handler base does for every such operation: 400/413/415
    for a JSON body, 401 and 429 when a key is required, 500, in the handler's error shape."""
    summary: str
    responses: dict
    errors: dict = field(default_factory=dict)
    body: Optional[type] = None
    query: Optional[type] = None
    headers: dict = field(default_factory=dict)            # request header name -> description
    response_headers: dict = field(default_factory=dict)   # status -> {name: description} (optional headers)
    # OpenAPI links from every 2xx answer: name -> (path template, method, {parameter: runtime expression});
    # they tell clients (and schemathesis' stateful tests) which id feeds which next call.
    links: dict = field(default_factory=dict)
    description: str = ""
    tags: tuple = ()
    body_optional: bool = False  # no body at all means the body model's defaults (ApiHandler.json_body(optional))


class OpenApiHandler(ApiHandler):
    """GET /v1/openapi.json: the document itself; no API key, so tools can fetch it first."""
    requires_auth = False
    operations = {"get": Operation("This OpenAPI 3.1 document", {200: dict}, tags=("meta",),
                                   description="Built from the route table and the pydantic models; no API "
                                               "key needed.")}

    def get(self):
        document = getattr(self.application, "openapi_document", None)
        if document is None:
            from handlers import routes
            document = self.application.openapi_document = build_document(routes())
        self.respond(document)


# --- building ------------------------------------------------------------------------------------

_GROUP = re.compile(r"\((?!\?)((?:[^()\\]|\\.)*)\)")


def is_api_route(handler):
    """Routes in the document: everything but the HTML admin UI and its live-events WebSocket."""
    return not issubclass(handler, (UiHandler, tornado.websocket.WebSocketHandler)) and getattr(handler, "in_openapi", True)


def implemented_methods(handler):
    """Lower-case HTTP methods a handler class implements (what Tornado dispatches rather than 405s)."""
    base = tornado.web.RequestHandler
    return [m.lower() for m in handler.SUPPORTED_METHODS if getattr(handler, m.lower()) is not getattr(base, m.lower())]


def path_template(pattern, handler):
    """r"/v1/contacts/([^/]+)" with path_params {"contactId": ...} -> ("/v1/contacts/{contactId}",
    [(name, description, regex of the value)])."""
    names = list(getattr(handler, "path_params", {}))
    groups = _GROUP.findall(pattern)
    if len(groups) != len(names):
        raise ValueError(f"{handler.__name__}.path_params names {len(names)} parameters; {pattern} has {len(groups)}")
    params = [(name, handler.path_params[name], group) for name, group in zip(names, groups)]
    it = iter(names)
    template = _GROUP.sub(lambda m: "{" + next(it) + "}", pattern).rstrip("$").replace("\\.", ".")
    if re.search(r"[\\^$*+?()\[\]|]", template):
        raise ValueError(f"cannot turn {pattern} into a path template")
    return template, params


class _Generator(GenerateJsonSchema):
    """Pydantic's schema, plus what its config changes about validation: a model with
    coerce_numbers_to_str (the custom channel's) accepts a JSON number wherever it takes a string; and no
    string holds U+0000, free text neither (handlers/base.py refuses it before any model: PostgreSQL's text
    cannot store it). An identifier's own "not" (all control characters) replaces this one."""

    def str_schema(self, schema):
        result = {**super().str_schema(schema), "not": {"pattern": "\\u0000"}}
        if self._config.coerce_numbers_to_str or schema.get("coerce_numbers_to_str"):
            result["type"] = ["string", "number"]
        return result


class _Components:
    """Collects every model an operation names; one models_json_schema call gives all definitions."""

    def __init__(self):
        self.models = []

    def ref(self, model, mode):
        if (model, mode) not in self.models:
            self.models.append((model, mode))
        return ("$model", model, mode)

    def resolve(self, document):
        refs, top = models_json_schema(self.models, ref_template=REF, schema_generator=_Generator)
        return _replace(document, refs), top.get("$defs", {})


def _replace(value, refs):
    if isinstance(value, tuple) and value and value[0] == "$model":
        return refs[(value[1], value[2])]
    if isinstance(value, dict):
        return {k: _replace(v, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, refs) for v in value]
    return value


def _json(schema):
    return {"application/json": {"schema": schema}}


def _header(description, required=False, schema=None):
    return {"description": description, "required": required, "schema": schema or {"type": "string"}}


def _query_parameters(model):
    """A query model's fields as OpenAPI query parameters (a query value is never null)."""
    schema = model.model_json_schema(ref_template=REF, schema_generator=_Generator)
    params = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        description = prop.pop("description", None)
        prop.pop("title", None)
        prop.pop("default", None)
        if "anyOf" in prop:
            options = [o for o in prop.pop("anyOf") if o.get("type") != "null"]
            prop.update(options[0] if len(options) == 1 else {"anyOf": options})
        param = {"name": name, "in": "query", "required": name in schema.get("required", []), "schema": prop}
        if description:
            param["description"] = description
        params.append(param)
    return params


ERROR_DESCRIPTIONS = {
    400: "Invalid request: the message names the field.",
    401: "Missing or invalid API key.",
    413: "Request body too large.",
    415: "The body is not application/json.",
    429: "Rate limit exceeded; retry after Retry-After seconds.",
    500: "Internal error (logged with the request id in X-Request-Id).",
    503: "Unavailable now (storage restarting or busy, the server draining): the message says whether anything "
         "was written; retry (with the same Idempotency-Key), after Retry-After seconds when given.",
}
# Standard Webhooks headers on every POST Parley makes to a client's URL (docs/api.md#webhook-delivery).
_SIGNED = [{"name": name, "in": "header", "required": True, "schema": {"type": "string"}, "description": text}
           for name, text in (("webhook-id", "The delivery's id, the same on every retry."),
                              ("webhook-timestamp", "Unix seconds of this attempt."),
                              ("webhook-signature", "v1,<base64 HMAC-SHA256 of \"id.timestamp.body\">; during a "
                                                    "secret rotation two, space-separated."))]
IDEMPOTENCY_KEY = {"name": idempotency.HEADER, "in": "header", "required": False, "schema": {
    "type": "string", "pattern": idempotency.KEY_PATTERN}, "description": (
    "Optional: a retry with the same key and the same parameters within 24 h is answered "
    "with the first answer, and writes nothing again; keys are per account.")}
REPLAYED = {"Idempotent-Replayed": "\"true\" when this is the stored answer of an earlier request with "
                                   "the same Idempotency-Key."}


def _operation(components, handler, method, op, path_params, path_label, alias_of=None):
    error_model = ChannelError if issubclass(handler, CustomChannelHandler) else ErrorBody
    is_api = issubclass(handler, ApiHandler)
    authenticated = is_api and handler.requires_auth
    idempotent = getattr(getattr(handler, method), "idempotent", False)  # handlers.base.idempotent
    errors = {}
    if op.body is not None:
        errors.update({400: ERROR_DESCRIPTIONS[400], 413: ERROR_DESCRIPTIONS[413], 415: ERROR_DESCRIPTIONS[415]})
    if authenticated:
        errors.update({401: ERROR_DESCRIPTIONS[401], 429: ERROR_DESCRIPTIONS[429]})
    if idempotent:
        errors.setdefault(400, "A malformed Idempotency-Key.")
        errors[422] = "The Idempotency-Key was used with other parameters in the last 24 h (IDEMPOTENCY_KEY_REUSED)."
    errors.update(op.errors)
    errors[500] = ERROR_DESCRIPTIONS[500]
    if is_api:
        errors.setdefault(503, ERROR_DESCRIPTIONS[503])

    request_id = {"X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"}}
    responses = {}
    for status, model in sorted(op.responses.items()):
        model, description = model if isinstance(model, tuple) else (model, "Success.")
        if model is BINARY:
            content = {"*/*": {"schema": {"type": "string", "format": "binary"}}}
        elif model is CSV:
            content = {"text/csv": {"schema": {"type": "string"}}}
        elif model is dict:
            content = _json({"type": "object"})
        elif model is None:
            content = None
        else:
            content = _json(components.ref(model, "serialization"))
        headers = dict(request_id)
        headers.update({name: _header(text) for name, text in op.response_headers.get(status, {}).items()})
        if idempotent:
            headers.update({name: _header(text) for name, text in REPLAYED.items()})
        responses[str(status)] = {"description": description, "headers": headers}
        if content:
            responses[str(status)]["content"] = content
        if op.links:
            responses[str(status)]["links"] = {
                name: {"operationId": operation_id(target_method, target_path), "parameters": parameters}
                for name, (target_path, target_method, parameters) in op.links.items()}
    for status, description in sorted(errors.items()):
        headers = dict(request_id)
        if status == 429:
            headers.update({"Retry-After": _header("Seconds to wait.", True, {"type": "string", "pattern": r"^\d+$"}),
                            "RateLimit-Policy": _header("IETF draft: the policy, e.g. \"default\";q=600;w=60."),
                            "RateLimit": _header("IETF draft: remaining and reset, e.g. \"default\";r=0;t=17."),
                            "X-RateLimit-Limit": _header("Requests allowed per minute."),
                            "X-RateLimit-Remaining": _header("Requests left in the window."),
                            "X-RateLimit-Reset": _header("Seconds until the window resets.")})
        responses[str(status)] = {"description": description, "headers": headers,
                                  "content": _json(components.ref(error_model, "serialization"))}
        for extra, text in op.response_headers.get(status, {}).items():
            headers[extra] = _header(text)

    parameters = [{"name": name, "in": "path", "required": True, "description": text,
                   "schema": {"type": "string", "pattern": f"^(?:{regex})$"}} for name, text, regex in path_params]
    if op.query is not None:
        parameters += _query_parameters(op.query)
    parameters += [{"name": name, "in": "header", "required": False, "description": text,
                    "schema": {"type": "string"}} for name, text in op.headers.items()]
    if idempotent:
        parameters.append(IDEMPOTENCY_KEY)

    result = {"operationId": operation_id(method, path_label), "summary": op.summary,
              "tags": list(op.tags) or [_tag(path_label)], "responses": responses}
    if alias_of is not None:  # generators name methods by operationId: the alias must not take the name
        result.update(operationId=operation_id(method, alias_of) + "Alias", deprecated=True,
                      summary=f"{op.summary} (alias of {alias_of}, kept for older clients)")
    if op.description:
        result["description"] = op.description
    if parameters:
        result["parameters"] = parameters
    if op.body is not None:
        result["requestBody"] = {"required": not op.body_optional, "content": _json(components.ref(op.body, "validation"))}
    if not authenticated:
        result["security"] = []
    elif handler.key_in_header_only:
        result["security"] = [{"ApiKeyHeader": []}, {"BearerAuth": []}]
    return result


def operation_id(method, path):
    return method + _camel(path)


def _camel(path):
    words = re.findall(r"[A-Za-z0-9_]+", path)  # "_" kept: the snake_case and camelCase aliases stay apart
    return "".join(w[:1].upper() + w[1:] for w in words if w != "v1")


def _tag(path):
    parts = [p for p in path.split("/") if p and p != "v1" and not p.startswith("{")]
    return parts[0] if parts else "api"


def build_document(route_table, title="Parley API", version=VERSION):
    """The whole OpenAPI 3.1 document for the API routes of route_table (a routes() list).

    Raises ValueError when an API handler does not describe a method it implements: a new endpoint
    cannot ship undocumented."""
    components = _Components()
    paths = {}
    first_path = {}  # handler -> the first path it serves: a later one is an alias (/incomingCustomChannelMessage)
    for route in route_table:
        pattern, handler = route[0], route[1]
        if not is_api_route(handler):
            continue
        operations = getattr(handler, "operations", None)
        if not operations:
            raise ValueError(f"{handler.__name__} ({pattern}) declares no operations for the OpenAPI document")
        missing = set(implemented_methods(handler)) - set(operations)
        if missing:
            raise ValueError(f"{handler.__name__} implements {sorted(missing)} without describing them")
        template, params = path_template(pattern, handler)
        alias_of = first_path.setdefault(handler, template)
        paths[template] = {method: _operation(components, handler, method, op, params, template,
                                              None if alias_of == template else alias_of)
                           for method, op in operations.items()}
    webhooks = {name: {"post": {"operationId": "webhook" + _camel(name.replace(".", "/")), "summary": summary,
                                "parameters": _SIGNED,
                                "requestBody": {"required": True, "content": _json(components.ref(model, "serialization"))},
                                "responses": {"200": {"description": "Any 2xx: delivered. 5xx, 408, 429, a timeout: "
                                                                     "retried later. 3xx, other 4xx: final."}}}}
                for name, (summary, model) in WEBHOOKS.items()}
    resolved, schemas = components.resolve({"paths": paths, "webhooks": webhooks})
    paths, webhooks = resolved["paths"], resolved["webhooks"]
    known = {item["operationId"] for methods in paths.values() for item in methods.values()}
    for methods in paths.values():
        for item in methods.values():
            for response in item["responses"].values():
                for name, link in response.get("links", {}).items():
                    if link["operationId"] not in known:
                        raise ValueError(f"link {name} of {item['operationId']} names no operation")
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": title, "version": version,
                 "description": "Contacts, lists and custom-channel messaging. Every request but "
                                "this document's needs an API key: in a header (recommended: query strings "
                                "end up in proxy and browser logs), x-api-key or Authorization: Bearer, or "
                                "as the apiKey query parameter; POST /v1/subaccounts/credits takes only the "
                                "headers. "
                                "A method a path does not list answers 405 with an Allow header."},
        "paths": paths,
        "webhooks": webhooks,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "ApiKeyQuery": {"type": "apiKey", "in": "query", "name": "apiKey"},
                "ApiKeyHeader": {"type": "apiKey", "in": "header", "name": "x-api-key"},
                "BearerAuth": {"type": "http", "scheme": "bearer",
                               "description": "Authorization: Bearer <API key>, the same key as x-api-key."},
            },
            "headers": {"X-Request-Id": _header("Identifies the request in the server log.", True)},
        },
        "security": [{"ApiKeyQuery": []}, {"ApiKeyHeader": []}, {"BearerAuth": []}],
    }
