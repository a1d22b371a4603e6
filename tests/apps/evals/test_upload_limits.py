"""A promptfoo file that expands without bound is refused with the same one line by the admin
upload and by ``evalsite import``, and nothing is written (rs3-14)."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from apps.evals.models import EvalSet


def _product_bomb() -> bytes:
    values = ", ".join(f"'{j}'" for j in range(10))
    lines = "".join(f"      v{i}: [{values}]\n" for i in range(7))
    return f"tests:\n  - vars:\n{lines}".encode()


def _alias_bomb() -> bytes:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    return ("\n".join(lines) + "\ntests:\n  - vars:\n      body: *a8\n").encode()


BOMBS = {
    "product": (_product_bomb, "this test's 7 list-valued var(s) (10 x 10 x 10 x 10 x 10 x 10 x 10) make 10,000,000"),
    "alias": (_alias_bomb, "YAML aliases expand this file to 2,345,679,0"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_the_admin_upload_refuses_a_bomb_in_one_line(client, staff, kind: str) -> None:
    make, message = BOMBS[kind]
    client.force_login(staff)
    response = client.post(
        reverse("admin:evals_evalset_upload"),
        {"name": "bomb", "file": SimpleUploadedFile("promptfooconfig.yaml", make()), "split_ratios": "60/20/20"},
    )
    assert response.status_code == 400
    text = html.unescape(response.content.decode())
    assert message in text and "promptfooconfig.yaml" in text and "to raise it" in text
    assert not EvalSet.objects.filter(name="bomb").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_the_cli_refuses_a_bomb_in_one_line(tmp_path: Path, kind: str) -> None:
    make, message = BOMBS[kind]
    folder = tmp_path / f"rs3-14-{kind}"
    folder.mkdir()
    config = folder / "promptfooconfig.yaml"
    config.write_bytes(make())
    with pytest.raises(CommandError) as error:
        call_command("import", str(config))
    assert message in str(error.value) and "\n" not in str(error.value)
    assert error.value.returncode == 2 and not EvalSet.objects.exists()
