"""``evalsite demo_users``: create (or reset) the local demo accounts admin / member / viewer.

For a local demo only: the passwords are printed and well known.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from apps.evals.cli.demo_users import DEMO_USERS


class Command(BaseCommand):
    help = "Create the local demo accounts (admin/admin, member/member, viewer/viewer)."

    def handle(self, *args: Any, **opts: Any) -> None:
        User = get_user_model()
        for username, password, _role in DEMO_USERS:
            user, _ = User.objects.get_or_create(username=username)
            user.set_password(password)
            user.is_staff = user.is_superuser = username == "admin"
            user.save()
            if username != "admin":
                user.groups.set([Group.objects.get(name=username)])
        for username, password, role in DEMO_USERS:
            self.stdout.write(f"  {username} / {password}  ({role})")
