"""What :mod:`evalcore.redact` treats as a secret, and what it never touches (rs3-17)."""

from __future__ import annotations

import base64

import pytest

from evalcore import redact as redact_module
from evalcore.redact import (
    REDACTED,
    configured_secrets,
    redact,
    redact_error_fields,
    redact_text,
    url_secrets,
)


@pytest.fixture(autouse=True)
def no_registered_secrets(monkeypatch):
    """Secrets other tests registered in this process (a --judge-base-url password) stay out."""
    monkeypatch.setattr(redact_module, "_registered", set())


def test_a_url_user_name_is_never_a_secret():
    # `make cluster` writes DATABASE_URL=postgres://evalsite@...: "evalsite" is a word, not a secret
    assert configured_secrets({"DATABASE_URL": "postgres://evalsite@127.0.0.1:5432/evalsite"}) == []
    assert url_secrets("http://evalsite@127.0.0.1:9/v1") == []
    secrets = configured_secrets({"EVALSITE_MODEL_BASE_URL": "http://postgres:pw12345678@127.0.0.1:9/v1"})
    assert "postgres" not in secrets and "pw12345678" in secrets
    assert base64.b64encode(b"postgres:pw12345678").decode() in secrets  # its Basic-auth form
    text = "evalsite rocks; see /srv/evalsite/app; use postgresql 15"
    assert redact_text(text, secrets) == text


def test_short_or_common_values_are_not_secrets():
    env = {"X_API_KEY": "short", "DB_PASSWORD": "postgres", "EMAIL_PASSWORD": "Password", "Y_TOKEN": "true"}
    assert configured_secrets(env) == []
    assert configured_secrets({"EVALSITE_EMAIL_PASSWORD": "s3cr3t-pass"}) == ["s3cr3t-pass"]
    # a value is a secret by its variable's name only: other variables' values never are
    assert configured_secrets({"EVALSITE_HOME": "/srv/evalsite-data-folder"}) == []


def test_a_short_secret_is_replaced_only_as_a_whole_token():
    secrets = ["pw12345678"]
    assert redact_text("refused pw12345678.", secrets) == f"refused {REDACTED}."
    assert redact_text("key=pw12345678&x", secrets) == f"key={REDACTED}&x"
    assert redact_text("pw123456789 and xpw12345678", secrets) == "pw123456789 and xpw12345678"


def test_a_long_secret_is_replaced_wherever_it_occurs():
    key = "sk-live-0123456789abcdefXYZ"
    assert redact_text(f"Bearer{key}tail", [key]) == f"Bearer{REDACTED}tail"


def test_only_a_payloads_errors_are_redacted():
    key = "sk-live-0123456789abcdefXYZ"
    payload = {"arguments": {"name": key}, "error": {"message": f"bad {key}"}, "tool_error": f"no {key}"}
    cleaned = redact_error_fields(payload, [key])
    assert cleaned["arguments"] == {"name": key}  # what the model asked for, as it asked
    assert cleaned["error"] == {"message": f"bad {REDACTED}"} and cleaned["tool_error"] == f"no {REDACTED}"
    assert payload["error"] == {"message": f"bad {key}"}  # not changed in place
    untouched = {"arguments": {"name": "x"}, "error": None}
    assert redact_error_fields(untouched, [key]) is untouched


def test_url_credentials_are_removed_from_free_text():
    assert redact("failed at http://bob:pw12345678@db.local/x", []) == "failed at http://db.local/x"
