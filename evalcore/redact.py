"""Keep credentials out of everything Evalsite stores or shows, without touching real text.

What is a secret (:func:`configured_secrets`): the value of a configured API key (the variables
named by :data:`KEY_ENV_POINTERS`, ``OPENAI_API_KEY``, and any variable whose *name* ends like a
credential: ``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*SECRET_KEY``, ``*PASSWORD``), the
*password* of a configured URL (never its user name: ``postgres://evalsite@db`` makes no word a
secret), and whatever the process registered with :func:`register_secret` (e.g. the password of a
``--judge-base-url``). A value shorter than :data:`MIN_SECRET_CHARS`, or a common word such as
``postgres`` or ``password`` (:data:`COMMON_VALUES`), is never a secret. A secret shorter than
:data:`ANYWHERE_SECRET_CHARS` is replaced only where it stands alone (not inside a longer word:
``pw12345678`` does not touch ``pw123456789``); a longer one wherever it occurs.

Where it applies (:func:`redact` / :func:`redact_text`): error texts (a run's, a case's, a span's
``error``, a score's error and explanation), logs (:class:`RedactingFilter`), a run's config and
summary, URLs (``scheme://user:pass@`` is removed from free text). What a target produced or was
given -- a run's final answer, a case's input and expected value, trace payloads other than their
``error`` -- is stored and reported exactly as it was (:func:`redact_error_fields` for payloads):
scorers and ``rescore`` read it, so redaction must never change it.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[redacted]"
"""What a secret value is replaced with."""

MIN_SECRET_CHARS = 8
"""Shorter values are not treated as secrets: redacting ``"1"`` or ``"true"`` would mangle text."""

ANYWHERE_SECRET_CHARS = 20
"""A secret at least this long is replaced wherever it occurs; a shorter one only as a whole token
(not preceded or followed by a letter, digit or ``_``), so a short password never eats part of a word."""

COMMON_VALUES = frozenset(
    {
        "postgres", "postgresql", "password", "evalsite", "changeme", "localhost", "12345678",
        "123456789", "secret123", "password1", "administrator", "undefined", "disabled",
    }
)  # fmt: skip
"""Values never treated as secrets even when a credential variable holds them (compared lowercased):
they are words that real text holds, and a credential that common protects nothing anyway."""

KEY_ENV_POINTERS = ("EVALSITE_MODEL_API_KEY_ENV", "EVALSITE_JUDGE_API_KEY_ENV")
"""Variables naming the variable that holds a key (the named variable's value is a secret)."""

_SECRET_NAME = re.compile(r"(API_?KEY|_TOKEN|_SECRET|SECRET_KEY|PASSWORD|PASSWD)$", re.IGNORECASE)
_URL_ENVS = (
    "EVALSITE_MODEL_BASE_URL",
    "EVALSITE_JUDGE_BASE_URL",
    "OPENAI_BASE_URL",
    "DATABASE_URL",
    "EVALSITE_REDIS_URL",
)
# scheme://userinfo@ where userinfo has no slash, space, @, ? or # (RFC 3986 authority)
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/\s@?#\"'<>]+)@")

_registered: set[str] = set()
_cache: dict[str, tuple[Any, list[str]]] = {}
_lock = threading.Lock()


def strip_userinfo(url: str) -> str:
    """``url`` without its ``user:password@`` part (unchanged when it has none or is not a URL).

    >>> strip_userinfo("http://bob:hunter2@judge.local:8080/v1")
    'http://judge.local:8080/v1'
    """
    if "@" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return _USERINFO.sub(r"\g<scheme>", url)
    if not parts.netloc or "@" not in parts.netloc:
        return _USERINFO.sub(r"\g<scheme>", url)
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def url_secrets(url: str) -> list[str]:
    """The password in a URL's userinfo (and its Basic-auth form), for :func:`register_secret`.

    The user name is never a secret (``postgres://evalsite@db``: ``evalsite`` is a word).
    """
    if "@" not in url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: list[str] = [parts.password] if parts.password and is_secret_value(parts.password) else []
    if parts.password:
        # HTTP clients turn URL userinfo into "Authorization: Basic base64(user:password)", which
        # an endpoint may echo back just like a bearer key
        found.append(base64.b64encode(f"{parts.username or ''}:{parts.password}".encode()).decode())
    return found


def is_secret_value(value: str | None) -> bool:
    """Whether ``value`` may be treated as a secret: :data:`MIN_SECRET_CHARS` or longer, not
    blank, not one of :data:`COMMON_VALUES`."""
    if not value:
        return False
    value = value.strip()
    return len(value) >= MIN_SECRET_CHARS and value.lower() not in COMMON_VALUES


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret in this process from now on (ignored unless :func:`is_secret_value`)."""
    if value and is_secret_value(value):
        with _lock:
            _registered.add(value.strip())


def configured_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """Every secret value currently configured, longest first.

    Sources: variables named by :data:`KEY_ENV_POINTERS` (default ``OPENAI_API_KEY``); any
    variable whose name ends like a credential (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``,
    ``*SECRET_KEY``, ``*PASSWORD``); the userinfo of the configured URLs; registered values.
    """
    if env is None:
        # Called for every value written, so cached; the key is the whole environment in its raw
        # form (1-2 us to build, where decoding os.environ costs 7), so no change is ever missed.
        raw = getattr(os.environ, "_data", None)
        if not isinstance(raw, dict):
            return _configured_secrets(os.environ)
        key = (tuple(raw), tuple(raw.values()), len(_registered))
        cached = _cache.get("secrets")
        if cached is not None and cached[0] == key:
            return cached[1]
        found = _configured_secrets(os.environ)
        _cache["secrets"] = (key, found)
        return found
    return _configured_secrets(env)


def _configured_secrets(env: Mapping[str, str]) -> list[str]:
    values: set[str] = set(_registered)
    names = {"OPENAI_API_KEY"} | {env[p].strip() for p in KEY_ENV_POINTERS if env.get(p, "").strip()}
    for name, value in env.items():
        if name in names or _SECRET_NAME.search(name):
            values.add(value.strip())
    for name in _URL_ENVS:
        values.update(url_secrets(env.get(name, "")))
    return sorted((v for v in values if is_secret_value(v)), key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with URL userinfo removed and each secret value replaced by :data:`REDACTED`."""
    if secrets is None:
        secrets = configured_secrets()
    for secret in secrets:
        if secret in text:
            if len(secret) >= ANYWHERE_SECRET_CHARS:
                text = text.replace(secret, REDACTED)
            else:
                text = _whole_token(secret).sub(REDACTED, text)
    if "://" in text and "@" in text:
        text = _USERINFO.sub(r"\g<scheme>", text)
    return text


@functools.lru_cache(maxsize=256)
def _whole_token(secret: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9_])" + re.escape(secret) + r"(?![A-Za-z0-9_])")


def redact_error_fields(payload: Any, secrets: list[str] | None = None) -> Any:
    """A trace payload with only its error values redacted (keys ``error`` and ``*_error``); the
    rest is what the target produced or was given, which trajectory scorers read. The same
    object when nothing changed."""
    if not isinstance(payload, dict):
        return payload
    changed: dict[str, Any] = {}
    for key, value in payload.items():
        if value and isinstance(key, str) and (key == "error" or key.endswith("_error")):
            cleaned = redact(value, secrets)
            if cleaned != value:
                changed[key] = cleaned
    return {**payload, **changed} if changed else payload


def redact_event_payload(event_type: str, payload: Any, secrets: list[str] | None = None) -> Any:
    """A trace event's payload as stored: an ``error`` event's payload redacted whole, any other
    event's only in its error values (:func:`redact_error_fields`)."""
    if event_type == "error":
        return redact(payload, secrets)
    return redact_error_fields(payload, secrets)


def redact(value: Any, secrets: list[str] | None = None) -> Any:
    """A copy of a JSON-like value (str, dict, list, tuple, scalars) with every string redacted.

    Dict keys are redacted too. Other objects are returned unchanged (the callers store JSON).
    Containers are first serialized (in C) and searched as one text: only a value that holds
    a secret or a URL credential is walked and copied, so the common case costs one
    ``json.dumps``.

    Args:
        value: The value to clean.
        secrets: The secret values to remove (default: :func:`configured_secrets`, read once).

    Returns:
        The same value when nothing needed changing, else a redacted copy.
    """
    if not value or isinstance(value, bool | int | float):
        return value
    if secrets is None:
        secrets = configured_secrets()
    if isinstance(value, str):
        return redact_text(value, secrets)
    if not isinstance(value, dict | list | tuple):
        return value
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and not _holds_secret(text, secrets):
        return value
    return _walk(value, secrets)


def _walk(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {_walk(k, secrets): _walk(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_walk(v, secrets) for v in value)
    return value


def _holds_secret(text: str, secrets: list[str]) -> bool:
    """Whether JSON ``text`` contains a secret (raw or as JSON escapes it) or URL userinfo."""
    for secret in secrets:
        if secret in text or _json_escaped(secret) in text:
            return True
    return "://" in text and "@" in text and _USERINFO.search(text) is not None


@functools.lru_cache(maxsize=256)
def _json_escaped(secret: str) -> str:
    return json.dumps(secret, ensure_ascii=False)[1:-1]


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (and traceback) of every record.

    Install it on handlers (Django's ``LOGGING``) so a key echoed in an exception message never
    reaches a log file or the console.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = configured_secrets()
        message = record.getMessage()
        cleaned = redact_text(message, secrets)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text, secrets)
        return True
