"""The case page marks a difference of Unicode normal form (repro bh-46): an answer ``café crème``
written with combining accents against the composed expected value read ``expected café crème
actual café crème`` with no marker. The diff now says the two are the same text in another
normal form and shows each combining mark on a dotted circle, as it marks a no-break space."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.evals.models import EvalResult

REPROS = Path(__file__).resolve().parents[2] / "fixtures" / "repros"

AGENT = '''
import unicodedata
from evalcore.discovery import target


@target(id="forms", scorers=["exact_match:normalize=none", "contains"])
def forms(x, ctx):
    """The expected text in another Unicode form (the repro's bh3-forms target)."""
    text = str(ctx.case.expected)
    form = ctx.case.metadata.get("form", "same")
    if form == "NFD":
        return unicodedata.normalize("NFD", text)
    if form == "NBSP":
        return text.replace(" ", "\\u00a0")
    if form == "ZWSP":
        return text[:2] + "\\u200b" + text[2:]
    if form == "LIG":
        return text.replace("fi", "\\ufb01")
    return text
'''


def diff_block(page: str) -> str:
    return page[page.index("<h2>Expected vs actual</h2>") : page.index("<h2>Scores</h2>")]


@pytest.mark.django_db(transaction=True)
def test_bh46_the_case_page_marks_another_normal_form(tmp_path, client, viewer):
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "forms.py").write_text(AGENT)
    call_command("eval", str(agents), "--set", str(REPROS / "bh-46-unicode-forms.jsonl"), "--quiet")
    client.force_login(viewer)
    pages = {}
    for result in EvalResult.objects.all():
        page = client.get(reverse("evals:result", args=[result.eval_run_id, result.pk]))
        assert page.status_code == 200
        pages[result.case_id] = (result, html.unescape(diff_block(page.content.decode())))

    nfd, block = pages["nfd"]
    # exact_match with normalize off fails and says another form would match; contains (NFC) passes
    exact = next(s for s in nfd.scores if s["name"] == "exact_match")
    assert exact["passed"] is False and "normalize=NFC matches" in exact["explanation"]
    assert 'data-normal-form="NFC"' in block
    assert "the same text in another Unicode normal form: expected NFC (composed), actual NFD (decomposed)" in block
    assert re.search(r"<ins>[^<]*cafe\u25cc\u0301", block), block  # the combining acute on its dotted circle

    _, lig = pages["lig"]
    assert 'data-normal-form="NFKC"' in lig and "⟨ﬁ U+FB01⟩" in lig
    _, nbsp = pages["nbsp"]
    assert "⍽" in nbsp and "data-normal-form" not in nbsp  # whitespace: its own marker, not a form
    _, same = pages["same"]
    assert "data-normal-form" not in same and "\u25cc" not in same
