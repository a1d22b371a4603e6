"""Issue 9 §4: tokens have an optional expiry and a last-used time; `token list|revoke`; a
revoked or expired token is refused everywhere: API reads, API writes, websockets."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from apps.core.auth import create_api_token, revoke_api_tokens, user_for_token
from apps.core.models import ApiToken
from apps.evals.management.commands.token import parse_lifetime
from apps.evals.views.live import CLOSE_FORBIDDEN
from tests.apps.factories import make_eval_run, make_eval_set


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("token", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def expire(token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db
def test_create_with_an_expiry_list_shows_it_and_last_use(member):
    raw = run("create", "--user", "member", "--name", "ci", "--expires-in", "30d").strip()
    token = ApiToken.objects.get()
    assert token.expires is not None and timedelta(days=29) < token.expires - timezone.now() <= timedelta(days=30)
    assert "never" in run("list").splitlines()[1]  # not used yet
    assert user_for_token(raw) == member
    assert "never" not in run("list").splitlines()[1]  # last used is now set
    expire(token)
    assert "expired" in run("list")
    assert user_for_token(raw) is None


def test_lifetimes_parse():
    assert parse_lifetime("90d") == timedelta(days=90) and parse_lifetime("12h") == timedelta(hours=12)
    for bad in ("0d", "1y", "-3d", "d"):
        with pytest.raises(Exception, match="not a lifetime"):
            parse_lifetime(bad)


@pytest.mark.django_db
def test_revoked_and_expired_tokens_are_refused_by_every_api_route(client, member):
    eval_set = make_eval_set(n_cases=1)
    _, revoked = create_api_token(user=member, name="old")
    expired_token, expired = create_api_token(user=member, name="short", expires_in=timedelta(hours=1))
    _, good = create_api_token(user=member, name="good")
    revoke_api_tokens(revoked[:12])
    expire(expired_token)
    routes = [("get", "/api/eval/sets"), ("get", "/api/eval/runs"), ("post", "/api/eval/runs")]
    for raw in (revoked, expired):
        for method, url in routes:
            body = {"set_id": eval_set.pk, "target_id": "x"} if method == "post" else None
            kwargs = {"content_type": "application/json"} if method == "post" else {}
            response = getattr(client, method)(url, body, HTTP_AUTHORIZATION=f"Bearer {raw}", **kwargs)
            assert response.status_code == 401, (url, response.content)
    assert client.get("/api/eval/sets", HTTP_AUTHORIZATION=f"Bearer {good}").status_code == 200
    with pytest.raises(CommandError, match="no token"):
        run("revoke", revoked[:12])


@pytest.mark.django_db(transaction=True)
async def test_websockets_take_a_valid_token_and_refuse_revoked_or_expired_ones():
    from django.contrib.auth.models import Group

    from evalsite.asgi import application
    from tests.conftest import ensure_roles

    def setup():
        ensure_roles()
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.create_user("wsviewer", password="x-pass-123")
        user.groups.add(Group.objects.get(name="viewer"))
        eval_run = make_eval_run(make_eval_set(n_cases=1), [True])
        _, good = create_api_token(user=user)
        _, revoked = create_api_token(user=user)
        revoke_api_tokens(revoked[:12])
        short, expired = create_api_token(user=user, expires_in=timedelta(hours=1))
        expire(short)
        return eval_run.id, good, revoked, expired

    run_id, good, revoked, expired = await database_sync_to_async(setup)()

    async def first_frame(raw: str) -> dict:
        socket = WebsocketCommunicator(
            application, f"/ws/eval/runs/{run_id}/", headers=[(b"authorization", f"Bearer {raw}".encode())]
        )
        connected, _ = await socket.connect(timeout=5)
        assert connected
        frame = await socket.receive_output(timeout=5)
        await socket.disconnect()
        return frame

    assert (await first_frame(good))["type"] == "websocket.send"  # the finished run's replay
    for raw in (revoked, expired):
        assert await first_frame(raw) == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
