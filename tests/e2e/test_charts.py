"""Charts never clip and never overlap (issue 26), in a real browser at 1280, 1440 and 1920 px:
every ``<text>`` of every chart on the trends, splits and run pages has its box (``getBBox``, in
viewBox units) inside its SVG's viewBox and apart from every other text of that chart; the wide
trends chart scales uniformly (text keeps its shape) and its labels show at a readable size."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tests.e2e.conftest import Site, clean_env, evalsite, login, open_context, shot
from tests.support.databases import subprocess_db_env

LONG_VARIANT = "a-rather-long-variant-name-that-the-legend-has-to-ellipsise-v2"

# JS: for every chart SVG, its viewBox and the boxes of its texts (user units), plus its scale
CHART_BOXES = """
() => [...document.querySelectorAll('svg.chart')].map(svg => {
  const vb = svg.viewBox.baseVal;
  const rect = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].map(t => {
    const b = t.getBBox();
    return {text: t.textContent, x0: b.x, y0: b.y, x1: b.x + b.width, y1: b.y + b.height,
            px: t.getBoundingClientRect().height};
  });
  return {label: svg.getAttribute('aria-label'), width: vb.width, height: vb.height,
          sx: rect.width / vb.width, sy: rect.height / vb.height, texts};
})
"""


@pytest.fixture(scope="module")
def chart_set(site: Site) -> int:
    """A set with five runs of two target/variants (a line chart, not the one-or-two sentence),
    each run with per-split pass rates; returns the set's id."""
    env = clean_env(**subprocess_db_env(site.db), DJANGO_SETTINGS_MODULE="evalsite.settings")
    code = (
        "from datetime import UTC, datetime, timedelta; "
        "from tests.apps.factories import make_eval_run, make_eval_set; "
        "s = make_eval_set('e2e_charts', 12); "
        "t0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC); "
        "split = lambda tr, dv, te: {'splits': {k: {'n': 4, 'passed': round(v * 4), 'pass_rate': v}"
        " for k, v in (('train', tr), ('dev', dv), ('test', te))}}; "
        "rates = [(0.75, 0.5, 0.5), (1.0, 0.75, 0.5), (1.0, 0.75, 0.75), (1.0, 1.0, 0.5), (0.75, 0.75, 0.75)]; "
        "[make_eval_run(s, [j % (i + 2) != 0 for j in range(12)], variant='v1', started=t0 + timedelta(days=i),"
        " summary=split(*r)) for i, r in enumerate(rates)]; "
        f"[make_eval_run(s, [j % 3 != i for j in range(12)], variant={LONG_VARIANT!r},"
        " started=t0 + timedelta(days=i, hours=6)) for i in range(3)]; "
        "print('set-id', s.pk)"
    )
    out = evalsite("shell", "--no-imports", "-c", code, env=env, log=site.log)
    return int(out.split("set-id", 1)[1].strip())


def _check(page: Page, where: str) -> list[dict[str, Any]]:
    charts: list[dict[str, Any]] = page.evaluate(CHART_BOXES)
    assert charts, f"{where}: no chart"
    for chart in charts:
        name = f"{where} · {chart['label']}"
        assert abs(chart["sx"] - chart["sy"]) < 0.01, f"{name}: scaled unevenly ({chart['sx']} x {chart['sy']})"
        boxes = chart["texts"]
        assert boxes, f"{name}: no text"
        for box in boxes:
            inside = box["x0"] >= -0.5 and box["y0"] >= -0.5
            inside = inside and box["x1"] <= chart["width"] + 0.5 and box["y1"] <= chart["height"] + 0.5
            assert inside, f"{name}: {box['text']!r} leaves the {chart['width']}x{chart['height']} viewBox: {box}"
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                apart = a["x1"] <= b["x0"] + 0.5 or b["x1"] <= a["x0"] + 0.5
                apart = apart or a["y1"] <= b["y0"] + 0.5 or b["y1"] <= a["y0"] + 0.5
                assert apart, f"{name}: {a['text']!r} overlaps {b['text']!r}: {a} {b}"
    return charts


@pytest.mark.parametrize("width", [1280, 1440, 1920])
def test_chart_labels_stay_inside_and_apart(browser: Browser, site: Site, chart_set: int, width: int) -> None:
    context = open_context(browser, site)
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 1000})
    login(page, "viewer")

    page.goto(f"/trends/?set={chart_set}")
    page.locator("#trend-chart svg.chart[data-wide]").wait_for()
    (trend,) = _check(page, f"trends @{width}")
    # the page width (up to 1500 px, where its 11 px labels would pass 14 px): it fills its
    # column, scaled uniformly, labels at 10-14 px
    column = page.evaluate("document.querySelector('#trend-chart').getBoundingClientRect().width")
    assert trend["sx"] * trend["width"] >= min(column, 1500) - 2
    assert 10 <= 11 * trend["sx"] <= 14, trend["sx"]
    legend = page.locator(f".legend span[title='echo/{LONG_VARIANT}']")
    assert legend.inner_text().endswith("…")  # ellipsised, the full name in its tooltip
    if width == 1440:
        shot(page, "charts_trends")  # tests/e2e/screenshots/; docs/screenshots/ holds a committed copy

    page.goto(f"/sets/{chart_set}/splits/?target=echo&variant=v1")
    page.locator("svg.chart").nth(1).wait_for()
    split_charts = _check(page, f"splits @{width}")
    assert len(split_charts) == 2
    assert page.locator("svg.chart line.errorbar").count() >= 15  # each split point with its Wilson interval
    if width == 1440:
        shot(page, "charts_splits")

    page.goto(f"/runs/{site.run_v1}/")
    page.locator("#run-distributions svg.chart").first.wait_for()
    histograms = _check(page, f"run page @{width}")
    assert len(histograms) >= 2
    assert page.locator("#run-distributions text.marker-label.p95").first.text_content() == "p95"
    context.close()
