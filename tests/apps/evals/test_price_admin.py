"""The price table in the admin (issue 27): the seed is there, and a change is a new version."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.evals.models import ModelPrice

pytestmark = pytest.mark.django_db


def test_the_seeded_table_and_an_edit_that_saves_a_new_version(client, staff):
    seeded = ModelPrice.objects.get(model="gpt-4o-mini")
    assert (seeded.version, str(seeded.input_usd_per_m), "2025-08-20" in seeded.source) == (1, "0.150000", True)
    client.force_login(staff)
    assert client.get(reverse("admin:evals_modelprice_changelist")).status_code == 200
    form = {
        "model": "gpt-4o-mini",
        "input_usd_per_m": "0.20",
        "output_usd_per_m": "0.80",
        "cached_input_usd_per_m": "0.10",
        "reasoning_usd_per_m": "0.80",
        "source": "contract 2026-12",
    }
    response = client.post(reverse("admin:evals_modelprice_change", args=[seeded.pk]), form)
    assert response.status_code == 302
    versions = list(
        ModelPrice.objects.filter(model="gpt-4o-mini").order_by("version").values_list("version", "input_usd_per_m")
    )
    assert [(v, str(p)) for v, p in versions] == [(1, "0.150000"), (2, "0.200000")]  # the old version stays
    response = client.post(reverse("admin:evals_modelprice_add"), {**form, "model": "my-model"})
    assert response.status_code == 302 and ModelPrice.objects.get(model="my-model").version == 1
    assert client.post(reverse("admin:evals_modelprice_delete", args=[seeded.pk]), {"post": "yes"}).status_code == 403
