"""API tokens: stored hashed, `evalsite token create|list|revoke`, and what authenticates."""

from __future__ import annotations

import hashlib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from apps.core.auth import create_api_token, revoke_api_tokens, user_for_token
from apps.core.models import ApiToken

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_only_the_hash_and_a_prefix_are_stored(member):
    token, raw = create_api_token(user=member, name="ci")
    assert raw.startswith("esk_") and len(raw) >= 40
    assert token.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert token.prefix == raw[:12]
    stored = ApiToken.objects.values_list("name", "prefix", "token_hash").get()
    assert raw not in stored


def test_create_prints_the_token_once_and_it_authenticates(member):
    out, err = run("create", "--user", "member", "--name", "ci")
    raw = out.strip()
    assert "shown once" in err
    assert user_for_token(raw) == member
    response = Client().get("/api/eval/runs", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    listing, _ = run("list")
    assert raw[:12] in listing and "member" in listing and "ci" in listing
    assert raw not in listing  # never shown again


def test_create_for_unknown_user_fails():
    with pytest.raises(CommandError, match="no user 'ghost'"):
        run("create", "--user", "ghost")


def test_list_shows_last_use(member):
    _, raw = create_api_token(user=member, name="laptop")
    assert "never" in run("list")[0]
    user_for_token(raw)
    assert "never" not in run("list", "--user", "member")[0]
    assert run("list", "--user", "nobody")[0].strip() == "no tokens"


def test_revoke_by_prefix(member, viewer):
    _, raw = create_api_token(user=member)
    _, other = create_api_token(user=viewer)
    out, _ = run("revoke", raw[:12])
    assert "revoked 1 token" in out
    assert user_for_token(raw) is None
    assert user_for_token(other) == viewer
    with pytest.raises(CommandError, match="no token with prefix"):
        run("revoke", raw[:12])


def test_revoke_refuses_an_empty_prefix(member):
    create_api_token(user=member)
    with pytest.raises(ValueError):
        revoke_api_tokens("")
    assert ApiToken.objects.count() == 1


@pytest.mark.parametrize("raw", ["", "esk_", "esk_unknown", "x" * 500, "Token abc"])
def test_unknown_tokens_authenticate_nobody(raw, member):
    create_api_token(user=member)
    assert user_for_token(raw) is None
