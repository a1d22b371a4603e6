"""Keep credentials out of everything Evalsite stores or shows.

Two kinds of secret reach text that Evalsite would otherwise keep (score errors, judge answers,
trace payloads, logs, reports):

* a credential written into a URL (``http://user:pass@host/v1``): :func:`strip_userinfo`
  removes it from a configured URL, and :func:`redact` removes any ``scheme://userinfo@`` it
  finds in free text;
* the value of a configured API key, echoed back by an endpoint ("Incorrect API key provided:
  Bearer sk-...") or printed by a target: :func:`redact` replaces every occurrence with
  :data:`REDACTED`.

The keys are read from the environment at each call (the names in :data:`KEY_ENV_POINTERS`
and any variable whose name looks like a credential, see :func:`configured_secrets`), plus
whatever the process registered with :func:`register_secret` (e.g. the password of a
``--judge-base-url`` given on the command line). The Django side applies :func:`redact` to every
text and JSON column as the value is written, so no write path can skip it.
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
    """The password (and a token-like user name) in a URL's userinfo, for :func:`register_secret`."""
    if "@" not in url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [s for s in (parts.password, parts.username) if s and len(s) >= MIN_SECRET_CHARS]
    if parts.password:
        # HTTP clients turn URL userinfo into "Authorization: Basic base64(user:password)", which
        # an endpoint may echo back just like a bearer key
        found.append(base64.b64encode(f"{parts.username or ''}:{parts.password}".encode()).decode())
    return found


def register_secret(value: str | None) -> None:
    """Treat ``value`` as a secret in this process from now on (ignored when too short)."""
    if value and len(value.strip()) >= MIN_SECRET_CHARS:
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
    return sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """``text`` with URL userinfo removed and each secret value replaced by :data:`REDACTED`."""
    if secrets is None:
        secrets = configured_secrets()
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "://" in text and "@" in text:
        text = _USERINFO.sub(r"\g<scheme>", text)
    return text


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
