"""The case page's and the compare case page's diff: repros bh-20 (a quadratic diff: 18 KB of
repeated lines took 36 s) and ho-09 (code cases: traceback flattened, a dict diffed against code,
code shown as a JSON string, every space a marker), with their data in tests/fixtures/repros.

Speed is measured by ``bench/bench_diff.py``; these tests assert which diff the page chose and
what it says, never a time."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from apps.evals.models import EvalResult, EvalRun
from evalcore.diff import LINE_DIFF_MAX_CHARS, WORD_DIFF_MAX_CHARS
from tests.apps.factories import make_eval_run, make_eval_set

ROOT = Path(__file__).resolve().parents[3]
REPROS = ROOT / "tests" / "fixtures" / "repros"
HO09 = REPROS / "ho-09-portal-code-case-page"


def section(page: str, start: str, end: str) -> str:
    return page[page.index(start) : page.index(end)]


def diff_mode(block: str) -> str:
    found = re.search(r'data-diff-mode="(\w+)"', block)
    assert found, block[:500]
    return found.group(1)


def column(block: str, title: str) -> str:
    """The ``<pre>`` text under an ``<h3>`` column title, HTML-unescaped (markup tags kept)."""
    found = re.search(rf"<h3>{re.escape(title)}\b.*?</h3><pre[^>]*>(.*?)</pre>", block, re.S)
    assert found, block[:500]
    return html.unescape(found.group(1))


@pytest.mark.django_db(transaction=True)
def test_ho09_code_case_page_shows_text_as_text_and_no_diff_between_shapes(client, viewer):
    for variant in ("canonical", "pass"):
        call_command("eval", str(HO09), "--set", str(HO09 / "cases.jsonl"), "--variant", variant, "--quiet")
    failing = EvalResult.objects.get(eval_run__variant="pass")
    client.force_login(viewer)
    page = client.get(reverse("evals:result", args=[failing.eval_run_id, failing.pk])).content.decode()

    # the input is code: shown as text, indentation kept, in a pre-wrap block
    code_input = section(page, "<h2>Input</h2>", "<h2>Expected vs actual</h2>")
    assert '<pre class="text">' in code_input
    assert "\n    &quot;&quot;&quot;Return value limited to the closed range [low, high].\n" in code_input

    # a dict expected value against a code string: different shapes, not diffed, both shown
    block = section(page, "<h2>Expected vs actual</h2>", "<h2>Scores</h2>")
    assert diff_mode(block) == "shapes"
    assert "<del>" not in block and "<ins>" not in block and "·" not in block
    assert "different shapes (a JSON object and text)" in block
    expected = column(block, "expected")
    assert "\\n" not in expected  # the test code is a text block, not a JSON string
    assert "      def check(candidate):\n          assert candidate(5, 0, 3) == 3\n" in expected
    assert '"entry_point": "clamp"' in expected
    assert column(block, "actual") == "    pass\n"

    # the scorer's traceback keeps its lines and indentation
    scores = section(page, "<h2>Scores</h2>", "<h2>Trace</h2>")
    traceback = re.search(r'<pre class="text explanation">(.*?)</pre>', scores, re.S)
    assert traceback and "<br>" not in scores
    assert "\n    check(clamp)\n" in traceback.group(1)
    assert "\n    assert candidate(5, 0, 3) == 3\nAssertionError" in traceback.group(1)

    # the compare page diffs A's code against B's (same shape): words, no space markers
    passing = EvalResult.objects.get(eval_run__variant="canonical")
    query = {"a": passing.eval_run_id, "b": failing.eval_run_id, "case": "code/clamp"}
    compare = client.get(reverse("evals:compare_case"), query).content.decode()
    block = section(compare, "<h2>A's output vs B's output</h2>", "<h2>Scores</h2>")
    assert diff_mode(block) == "word"
    assert column(block, "A") == "    <del>return max(low, min(value, high))</del>\n"
    assert column(block, "B") == "    <ins>pass</ins>\n"
    assert "·" not in block.split("</span></p>")[-1]  # only the legend names the marker
    expected_section = section(compare, "<h2>Expected</h2>", "<h2>A's output")
    assert "\\n" not in expected_section and "    assert candidate(-1, 0, 3) == 0\n" in expected_section
    tracebacks = re.findall(r'<pre class="text explanation">', section(compare, "<h2>Scores</h2>", "</main>"))
    assert len(tracebacks) == 1  # B's failure, with its lines


@pytest.mark.django_db(transaction=True)
def test_bh20_repeated_lines_case_page_is_a_word_diff_of_the_one_changed_line(client, viewer):
    cases = str(REPROS / "bh-20-repeated-lines.jsonl")
    call_command("eval", str(REPROS / "agents"), "--set", cases, "--target", "log_lines", "--quiet")
    eval_run = EvalRun.objects.get()
    result = EvalResult.objects.get(eval_run=eval_run)
    client.force_login(viewer)
    page = client.get(reverse("evals:result", args=[eval_run.pk, result.pk])).content.decode()
    block = section(page, "<h2>Expected vs actual</h2>", "<h2>Scores</h2>")
    assert diff_mode(block) == "word"
    assert 'id="diff-note"' not in block
    assert column(block, "expected") == "ok\n" * 6000
    actual = column(block, "actual")
    assert actual == "ok\n" * 3000 + "<ins>FAIL\n</ins>" + "ok\n" * 3000


def _page_block(client, expected, actual) -> tuple[str, str]:
    """(case page's diff block, compare case page's diff block) for one case and two runs."""
    eval_set = make_eval_set(f"big-{EvalRun.objects.count()}", 1)
    eval_set.cases.update(expected=expected)
    run_a = make_eval_run(eval_set, [False], variant="a", outputs=[expected])
    run_b = make_eval_run(eval_set, [False], variant="b", outputs=[actual])
    result = run_b.results.get()
    page = client.get(reverse("evals:result", args=[run_b.pk, result.pk])).content.decode()
    query = {"a": run_a.pk, "b": run_b.pk, "case": "c0"}
    compare = client.get(reverse("evals:compare_case"), query).content.decode()
    return (
        section(page, "<h2>Expected vs actual</h2>", "<h2>Scores</h2>"),
        section(compare, "<h2>A's output vs B's output</h2>", "<h2>Scores</h2>"),
    )


@pytest.mark.django_db
def test_long_outputs_fall_back_to_a_line_diff_then_to_no_diff_and_say_so(client, viewer):
    client.force_login(viewer)
    n = WORD_DIFF_MAX_CHARS // 3 + 10  # past the word-diff size, under the line-diff size
    expected, actual = "ok\n" * n, "ok\n" * (n // 2) + "ok FAIL\n" + "ok\n" * (n // 2)
    for block in _page_block(client, expected, actual):
        assert diff_mode(block) == "line"
        assert "Line-level diff: a side is longer than 50,000 characters" in block
        assert "<ins>ok FAIL\n</ins>" in block and "<del>" not in block

    n = LINE_DIFF_MAX_CHARS // 3 + 10  # past the line-diff size: no diff at all
    expected, actual = "ok\n" * n, "ok\n" * (n // 2) + "FAIL\n" + "ok\n" * (n // 2)
    for block in _page_block(client, expected, actual):
        assert diff_mode(block) == "none"
        assert "No diff: a side is longer than 300,000 characters" in block
        assert "<ins>" not in block and "<del>" not in block
        assert "FAIL\n" in block  # in the first 200,000 characters shown; the rest is cut, and said so
        assert re.search(r"… \(100,0\d\d more characters not shown\)</pre>", block)


@pytest.mark.django_db
def test_texts_too_different_for_a_fine_diff_are_one_block_with_a_note(client, viewer):
    client.force_login(viewer)
    # every other line differs, thousands of times: past the diff's step budget
    expected = "".join(f"a{i}\nsame\n" for i in range(3000))
    actual = "".join(f"b{i}\nsame\n" for i in range(3000))
    for block in _page_block(client, expected, actual):
        assert diff_mode(block) == "line"
        assert "differ in too many places" in block
