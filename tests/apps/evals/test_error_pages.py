"""Refusals and missing pages are shown inside the portal, with the reason, not as bare text."""

from __future__ import annotations

import pytest


@pytest.mark.django_db
def test_403_and_404_pages_keep_the_nav_and_say_why(client, viewer):
    client.force_login(viewer)
    refused = client.get("/runs/new/")
    assert refused.status_code == 403
    assert b"Not allowed" in refused.content and b"member role" in refused.content and b"topnav" in refused.content
    missing = client.get("/runs/doesnotexist/")
    assert missing.status_code == 404
    assert b"Not found" in missing.content and b"topnav" in missing.content
