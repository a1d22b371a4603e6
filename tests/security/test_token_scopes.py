"""rs3-08: API tokens have a scope (read / write / admin) and a default lifetime. A token's power
is the lower of its scope and its user's role: an admin's write token cannot delete runs, a
member's read token cannot start, review or send traces, a viewer's admin token is still a
viewer. ``evalsite token create --scope`` / ``--expires-in never``; ``token list`` and the admin's
tokens page show both."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from apps.core.auth import DEFAULT_LIFETIME, create_api_token, user_for_token
from apps.core.models import ApiToken, Scope
from apps.evals.models import EvalRun
from tests.apps.factories import make_eval_run, make_eval_set


def bearer(raw: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def token(user: User, scope: str) -> str:
    return create_api_token(user=user, scope=scope)[1]


def command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_only_an_admin_token_of_staff_deletes_a_run(staff) -> None:
    eval_run = make_eval_run(make_eval_set(n_cases=2), [True, False])
    for scope in (Scope.READ, Scope.WRITE):
        response = bearer(token(staff, scope)).delete(f"/api/eval/runs/{eval_run.pk}")
        assert response.status_code == 403
        assert f"this API token's scope is {scope}" in response.json()["message"]
    assert EvalRun.objects.filter(pk=eval_run.pk).exists()
    assert bearer(token(staff, Scope.ADMIN)).delete(f"/api/eval/runs/{eval_run.pk}").status_code == 200
    assert not EvalRun.objects.filter(pk=eval_run.pk).exists()


@pytest.mark.django_db
def test_a_read_token_reads_but_cannot_review_or_send_traces(member) -> None:
    eval_run = make_eval_run(make_eval_set(n_cases=2), [True, False])
    client = bearer(token(member, Scope.READ))
    assert client.get(f"/api/eval/runs/{eval_run.pk}").status_code == 200
    review = client.post(
        f"/api/eval/runs/{eval_run.pk}/cases/c0/reviews", data={"verdict": "pass"}, content_type="application/json"
    )
    assert review.status_code == 403
    assert "scope is read" in review.json()["message"]
    otlp = client.post("/api/otlp/v1/traces", data=b"{}", content_type="application/json")
    assert otlp.status_code == 403
    assert "scope is read" in json.loads(otlp.content)["message"]
    # the member's write token may review
    written = bearer(token(member, Scope.WRITE)).post(
        f"/api/eval/runs/{eval_run.pk}/cases/c0/reviews", data={"verdict": "pass"}, content_type="application/json"
    )
    assert written.status_code == 201


@pytest.mark.django_db
def test_a_scope_never_raises_a_role(viewer) -> None:
    eval_run = make_eval_run(make_eval_set(n_cases=1), [True])
    client = bearer(token(viewer, Scope.ADMIN))
    assert client.get(f"/api/eval/runs/{eval_run.pk}").status_code == 200
    review = client.post(
        f"/api/eval/runs/{eval_run.pk}/cases/c0/reviews", data={"verdict": "pass"}, content_type="application/json"
    )
    assert review.status_code == 403
    assert client.delete(f"/api/eval/runs/{eval_run.pk}").status_code == 403


@pytest.mark.django_db
def test_a_refusal_names_the_role_when_the_role_is_the_limit_and_only_enough_scopes_when_the_token_is(
    viewer, member, staff
) -> None:
    eval_run = make_eval_run(make_eval_set(n_cases=1), [True])
    for scope in Scope.values:
        refused = bearer(token(viewer, scope)).delete(f"/api/eval/runs/{eval_run.pk}")
        assert refused.status_code == 403
        # no token would help a viewer: the message says so, with no `token create` hint
        assert refused.json()["message"] == "only staff can delete runs: user 'viewer' is not staff"
        review = bearer(token(viewer, scope)).post(
            f"/api/eval/runs/{eval_run.pk}/cases/c0/reviews", data={"verdict": "pass"}, content_type="application/json"
        )
        assert review.json()["message"] == "only members can review results: user 'viewer' is not a member"
        otlp = bearer(token(viewer, scope)).post("/api/otlp/v1/traces", data=b"{}", content_type="application/json")
        assert "token create" not in json.loads(otlp.content)["message"]
    for scope in (Scope.READ, Scope.WRITE):
        # staff's token below admin: only admin is enough, and write (which it may have) is not offered
        message = bearer(token(staff, scope)).delete(f"/api/eval/runs/{eval_run.pk}").json()["message"]
        assert message == (
            f"only staff can delete runs (this API token's scope is {scope}: "
            "`evalsite token create --scope admin` for more)"
        )
    review = bearer(token(member, Scope.READ)).post(
        f"/api/eval/runs/{eval_run.pk}/cases/c0/reviews", data={"verdict": "pass"}, content_type="application/json"
    )
    assert review.json()["message"] == (
        "only members can review results (this API token's scope is read: "
        "`evalsite token create --scope write|admin` for more)"
    )
    assert EvalRun.objects.filter(pk=eval_run.pk).exists()


@pytest.mark.django_db
def test_creating_a_token_above_the_users_role_says_so_in_one_line_and_still_creates_it(viewer, member, staff) -> None:
    raw, said = command("create", "--user", "viewer", "--name", "big", "--scope", "admin")
    assert ApiToken.objects.get(name="big").scope == Scope.ADMIN and user_for_token(raw.strip()) is not None
    (note,) = [line for line in said.splitlines() if line.startswith("note:")]
    assert note == (
        "note: user 'viewer' is not staff nor a member: this admin token can do no more than the user's role allows"
    )
    _, said = command("create", "--user", "member", "--scope", "admin")
    assert "note: user 'member' is not staff: this admin token" in said
    _, said = command("create", "--user", "viewer", "--scope", "write")
    assert "note: user 'viewer' is not a member: this write token" in said
    for user, scope in (("viewer", "read"), ("member", "write"), ("admin", "admin")):
        assert "note:" not in command("create", "--user", user, "--scope", scope)[1]


@pytest.mark.django_db
def test_staff_reading_through_a_read_token_still_reads_but_the_cut_is_never_saved(staff) -> None:
    user = user_for_token(token(staff, Scope.READ))
    assert user is not None and not user.is_staff and user.has_perm("evals.view_evalrun")
    assert not user.has_perm("evals.start_evalrun")
    with pytest.raises(RuntimeError):
        user.save()
    assert User.objects.get(pk=staff.pk).is_staff


@pytest.mark.django_db
def test_new_tokens_expire_after_the_default_lifetime_unless_never(member) -> None:
    made, _ = create_api_token(user=member)
    assert made.scope == Scope.WRITE
    assert made.expires is not None
    assert DEFAULT_LIFETIME - timedelta(minutes=1) < made.expires - timezone.now() <= DEFAULT_LIFETIME
    raw, said = command("create", "--user", "member", "--name", "forever", "--expires-in", "never", "--scope", "read")
    forever = ApiToken.objects.get(name="forever")
    assert forever.expires is None and forever.scope == Scope.READ
    assert "scope read, never expires" in said
    assert user_for_token(raw.strip()) is not None
    listing, _ = command("list")
    header, *rows = listing.splitlines()
    assert header.split()[:4] == ["prefix", "user", "name", "scope"]
    forever_row = next(r for r in rows if "forever" in r)
    assert " read " in forever_row and forever_row.rstrip().endswith("never")


@pytest.mark.django_db
def test_the_tokens_page_shows_scope_and_expiry(staff, member) -> None:
    create_api_token(user=member, name="ci-read", scope=Scope.READ)
    client = Client()
    client.force_login(staff)
    page = client.get("/admin/core/apitoken/").content.decode()
    assert "ci-read" in page
    assert "column-scope" in page and "column-expires" in page
