"""Shared fixtures: persona users (owner, teammate, outsider) and small factories."""

from __future__ import annotations

import pytest

from tests.support.fixtures import stand_in_llm  # noqa: F401 - the local chat-completions stand-in


@pytest.fixture
def member(django_user_model):
    """A member: reads, starts runs, uses the playground, captures cases."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("member", password="member-pass-123")
    user.groups.add(Group.objects.get(name="member"))
    return user


@pytest.fixture
def viewer(django_user_model):
    """A viewer: reads only."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("viewer", password="viewer-pass-123")
    user.groups.add(Group.objects.get(name="viewer"))
    return user


@pytest.fixture
def outsider(django_user_model):
    """A logged-in user with no role."""
    return django_user_model.objects.create_user("outsider", password="outsider-pass-123")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_superuser("admin", password="admin-pass-123")
