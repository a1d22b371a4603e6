"""The one ``NinjaAPI`` (mounted at ``/api/``; OpenAPI docs at ``/api/docs``).

Every route needs a logged-in user: a Django session (CSRF enforced on unsafe methods) or a
bearer API token. Errors are always JSON ``{"message": ..., "field": ...}``. Domain errors
(``evalcore.errors.EvalsiteError``) are mapped here, once: invalid input 400, not found 404,
conflict 409; request validation 422. Any other exception is a bug: it answers 500 (JSON, no
traceback; ``evalsite.urls.handler500``) and is logged.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

from apps.core.auth import api_auth
from apps.core.storable import utf8_encodable
from apps.evals.api.compare import router as compare_router
from apps.evals.api.conversations import router as cases_router
from apps.evals.api.exports import router as exports_router
from apps.evals.api.ledger import router as ledger_router
from apps.evals.api.reviews import router as reviews_router
from apps.evals.api.runs import router as runs_router
from apps.evals.api.schemas import ApiError
from apps.evals.api.sets import router as sets_router
from apps.evals.api.status import router as status_router
from apps.online.api import router as online_router
from evalcore.errors import ConflictError, EvalsiteError, NotFoundError

NUL_MESSAGE = "text may not contain a NUL character (U+0000)"
SURROGATE_MESSAGE = (
    "text may not contain a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its other half): "
    "no database can store it"
)


class TextParser(Parser):
    """Ninja's JSON and query-string parsing, refusing any string that holds a NUL character
    (U+0000), as Django's forms do: PostgreSQL cannot store one (the write would be a 500) and
    SQLite can, so both answer the same 422 naming the field. A lone UTF-16 surrogate (a JSON
    ``"\\ud83d"`` escape alone) is refused the same way: no database can store it."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        data = super().parse_body(request)
        _refuse_nul(data, ("body",))
        return data

    def parse_querydict(self, data: Any, list_fields: list[str], request: HttpRequest) -> dict[str, Any]:
        parsed = super().parse_querydict(data, list_fields, request)
        _refuse_nul(parsed, ("query",))
        return parsed


def _refuse_nul(value: Any, loc: tuple[Any, ...]) -> None:
    """Raise ninja's ``ValidationError`` at the first string (value or key) holding U+0000 or a
    lone surrogate."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError([{"loc": loc, "msg": NUL_MESSAGE}])
        if not utf8_encodable(value):
            raise ValidationError([{"loc": loc, "msg": SURROGATE_MESSAGE}])
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_nul(key, (*loc, key))
            _refuse_nul(item, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_nul(item, (*loc, index))


api = NinjaAPI(
    parser=TextParser(),
    title="Evalsite API",
    version="1",
    description="Eval sets, runs, per-case results and A/B compare. Auth: session or `Authorization: Bearer <token>`.",
    auth=api_auth,
    urls_namespace="api",
    docs_decorator=login_required,
)
api.add_router("/eval/", cases_router)
api.add_router("/eval/", sets_router)
api.add_router("/eval/", runs_router)
api.add_router("/eval/", compare_router)
api.add_router("/eval/", reviews_router)
api.add_router("/eval/", exports_router)
api.add_router("/eval/", ledger_router)
api.add_router("/", status_router)
api.add_router("/online/", online_router)


def _error(request: HttpRequest, status: int, message: str, field: str | None = None, **extra: Any) -> HttpResponse:
    return api.create_response(request, {"message": message, "field": field, **extra}, status=status)


def _field_of(loc: list[Any] | tuple[Any, ...]) -> str | None:
    # ninja locations look like ("body", "data", "split") or ("query", "page"): drop the source
    # and the parameter name ninja gives the schema; keep the field path people wrote.
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header", "cookie", "form", "file")]
    if len(parts) > 1 and parts[0] in ("data", "filters", "params", "payload", "ninja_pagination"):
        parts = parts[1:]
    return ".".join(parts) or None


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return _error(request, exc.status_code, exc.message, exc.field)


@api.exception_handler(RequestDataTooBig)
def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(request, 413, f"request body too large (the limit is {limit} bytes)")


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(request, 401, "log in or send an API token (Authorization: Bearer <token>)")


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, ValidationError):  # ninja wraps what the body parser raises
        return _validation_error(request, exc.__cause__)
    return _error(request, exc.status_code, exc.message)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = exc.errors or [{}]
    first = errors[0]
    field = _field_of(first.get("loc", ()))
    message = str(first.get("msg") or "invalid input")
    if field:
        message = f"{field}: {message}"
    return _error(request, 422, message, field, errors=[{"loc": e.get("loc"), "msg": e.get("msg")} for e in errors])


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, str(exc) or "not found")


@api.exception_handler(OverflowError)
def _id_out_of_range(request: HttpRequest, exc: OverflowError) -> HttpResponse:
    # an id too large for the database's integer columns names no row: not found, not a 500
    return _error(request, 404, "no such id (the number is out of range)")


def status_of(exc: EvalsiteError) -> int:
    """The HTTP status of a domain error: 404 not found, 409 conflict, else 400 (invalid input)."""
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    return 400


@api.exception_handler(EvalsiteError)
def _domain_error(request: HttpRequest, exc: EvalsiteError) -> HttpResponse:
    return _error(request, status_of(exc), exc.message, exc.field)
