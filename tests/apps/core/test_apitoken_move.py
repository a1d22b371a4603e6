"""``ApiToken`` moved from ``evals`` to ``core`` by a state-only migration pair: a token made
before the move (on the old model, at ``evals.0007``) still authenticates after migrating."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from apps.core.auth import user_for_token
from apps.core.models import ApiToken

BEFORE_MOVE = [("evals", "0007_apitoken_expiry")]


@pytest.mark.django_db(transaction=True)
def test_a_token_made_before_the_move_still_authenticates_after_it():
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE_MOVE)  # unapplies core.0001 and evals.0008: state only
    try:
        old_apps = executor.loader.project_state(BEFORE_MOVE).apps
        with pytest.raises(LookupError):
            old_apps.get_model("core", "ApiToken")
        OldToken = old_apps.get_model("evals", "ApiToken")
        User = old_apps.get_model("auth", "User")
        user = User.objects.create(username="ci-bot", is_active=True)
        raw = "esk_made-before-the-move-0123456789abcdefghijklmnopq"
        OldToken.objects.create(
            user=user,
            name="ci",
            prefix=raw[:12],
            token_hash=ApiToken.hash(raw),
            expires=timezone.now() + timedelta(days=1),
        )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)

    token = ApiToken.objects.get()  # the same row, now read through core's model
    assert (token.name, token.prefix, token.user.username) == ("ci", raw[:12], "ci-bot")
    assert ApiToken._meta.db_table == "evals_apitoken"
    authenticated = user_for_token(raw)
    assert authenticated is not None and authenticated.username == "ci-bot"
    assert user_for_token(raw[:-1] + "x") is None
