"""The rule-adherence lens in a real browser (issue 15): the per-rule blocks the run and compare
pages load after themselves (htmx), and a case's rules.

Two CLI evals of the rules-demo example (``examples/agents``, its offline model, no judge) are
written to the site's database, as a user would: ``lean`` drops rule R2 after turn 1, so R2 is
``rule_absent`` on its three multi-turn cases and ``unjudged`` (present, no judge) in ``full``.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.conftest import REPO, Site, clean_env, evalsite, once_per_site, shot
from tests.support.databases import subprocess_db_env

AGENTS = REPO / "examples" / "agents"
SET = REPO / "examples" / "sets" / "rules_demo.jsonl"


def rules_demo_runs(site: Site) -> tuple[str, str]:
    """Run the rules-demo variants full and lean through the CLI (once per site); their run ids."""
    return once_per_site(site, "rules_demo_runs", lambda: _run_rules_demo(site))


def _run_rules_demo(site: Site) -> tuple[str, str]:
    env = clean_env(
        **subprocess_db_env(site.db),
        EVALSITE_DATA_DIR=str(site.db.parent / "var"),
        DJANGO_SETTINGS_MODULE="evalsite.settings",
    )
    for variant in ("full", "lean"):
        evalsite(
            "eval", str(AGENTS), "--set", str(SET), "--target", "rules-demo", "--variant", variant, "--quiet",
            env=env, log=site.log,
        )  # fmt: skip
    code = (
        "from apps.evals.models import EvalRun; "
        "runs = EvalRun.objects.filter(target_id='rules-demo').order_by('-started'); "
        "print('run-ids', runs.filter(variant='full').first().id, runs.filter(variant='lean').first().id)"
    )
    out = evalsite("shell", "--no-imports", "-c", code, env=env, log=site.log)
    full, lean = out.split("run-ids", 1)[-1].split()
    return full, lean


def test_rules_on_the_run_compare_and_case_pages(viewer_page: Page, site: Site) -> None:
    page = viewer_page
    full, lean = rules_demo_runs(site)

    page.goto(f"/runs/{lean}/")
    r2 = page.locator("#run-rules tr[data-rule='R2']")  # arrives after the page
    expect(r2).to_contain_text("100.0%")  # absent in every decided case...
    expect(r2).to_contain_text("n=3/4")  # ...of the three decided: the one-turn case is unjudged
    expect(r2).to_contain_text("1 unjudged")
    shot(page, "rules_run")

    page.goto(f"/compare/?a={full}&b={lean}")
    flip = page.locator("#rule-flips tr[data-rule='R2']")
    expect(flip).to_have_attribute("data-flip", "unjudged → rule_absent")
    expect(flip.locator("td.num")).to_have_text("3")
    expect(flip.locator("a")).to_have_count(3)
    shot(page, "rules_compare")
    flip.get_by_role("link", name="pricing-third-turn").click()
    page.wait_for_url("**/compare/case/**")
    expect(page.locator("body")).to_contain_text("pricing-third-turn")

    page.goto(f"/runs/{lean}/")
    page.locator("#results").get_by_role("link", name="pricing-third-turn").click()
    rule = page.locator("#case-rules tr[data-rule='R2']")
    expect(rule).to_have_attribute("data-outcome", "rule_absent")
    expect(rule).to_contain_text("dropped after turn 1")
    shot(page, "rules_case")
