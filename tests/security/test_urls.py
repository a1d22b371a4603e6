"""Issue 9 §4-5: every URL of the URLconf, found by walking the resolver (a new route is covered
without editing a list), fetched anonymously, as a viewer and as another member; every unsafe
method refused without a CSRF token; no page carries inline script; a private playground chat
shows on none of them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.apps.factories import make_eval_run, make_eval_set
from tests.security.conftest import SECRET

pytestmark = pytest.mark.django_db

ANONYMOUS_OK = {"accounts/login/", "admin/login/"}
"""The only pages that answer 200 to an anonymous visitor."""
OTLP_PREFIX = "/api/otlp/"
"""OTLP/HTTP (docs/otel.md): bearer tokens only, and errors in OTLP's ``google.rpc.Status`` shape
(its own test: tests/apps/traces/test_otlp_ingest.py), not the JSON API's."""

_PARAM = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")
_GROUP = re.compile(r"\(\?P<(?P<name>\w+)>(?P<body>[^()]*(?:\([^()]*\)[^()]*)*)\)")


@dataclass(frozen=True)
class Route:
    """One concrete URL for a pattern of the URLconf."""

    url: str
    pattern: str


def _fill_regex(regex: str, values: dict[str, str]) -> str | None:
    def group(match: re.Match[str]) -> str:
        body = match.group("body")
        if re.fullmatch(r"[\w|-]+", body):  # an alternation of names, e.g. admin's app labels
            return body.split("|")[0]
        return values.get(match.group("name"), "1")

    text = _GROUP.sub(group, regex).lstrip("^").rstrip("$").replace("\\Z", "")
    text = text.replace("\\.", ".").replace("\\-", "-")
    return None if re.search(r"[()\[\]*+?|\\]", text) else text


def walk(values: dict[str, str]) -> list[Route]:
    """Every pattern of the root URLconf as a concrete URL (parameters from ``values`` by name, else 1)."""
    routes: list[Route] = []

    def visit(patterns: list[Any], prefix: str, shown: str) -> None:
        for entry in patterns:
            raw = str(entry.pattern)
            if hasattr(entry.pattern, "_route"):  # path(): <conv:name> parameters
                part = _PARAM.sub(lambda m: values.get(m.group("name"), "1"), entry.pattern._route)
            else:
                part = _fill_regex(entry.pattern._regex, values)
                if part is None:
                    raise AssertionError(f"cannot build a URL for the pattern {shown + raw!r}: teach _fill_regex")
            if isinstance(entry, URLResolver):
                visit(entry.url_patterns, prefix + part, shown + raw)
            elif isinstance(entry, URLPattern):
                routes.append(Route("/" + prefix + part, shown + raw))

    visit(get_resolver().url_patterns, "", "")
    return sorted(set(routes), key=lambda r: r.url)


@pytest.fixture
def site(private_chat, member2, viewer, staff):
    """Data for every kind of page, and each route as a concrete URL."""
    session, run = private_chat
    eval_set = make_eval_set(n_cases=2)
    eval_run = make_eval_run(eval_set, [True, False])
    other = make_eval_run(eval_set, [False, True], variant="v2")
    result = eval_run.results.first()
    values = {
        "set_id": str(eval_set.pk),
        "run_id": eval_run.id,
        "result_id": str(result.pk),
        "session_id": str(session.pk),
        "pk": str(run.pk),
        "object_id": str(eval_set.pk),
        "app_label": "evals",
        "url": "evals/",
        "rest": "nope",
        "path": "evalsite/site.css",
    }
    routes = walk(values)
    # query strings for pages that need them (compare, a case of a comparison)
    extra = [
        Route(f"/compare/?a={eval_run.id}&b={other.id}", "compare"),
        Route(f"/compare/case/?a={eval_run.id}&b={other.id}&case={result.case_id}", "compare/case"),
        Route(f"/api/eval/compare?a={eval_run.id}&b={other.id}", "api/compare"),
    ]
    return routes + extra


def test_the_walk_finds_the_routes_people_use(site):
    urls = {r.url for r in site}
    for expected in ("/runs/", "/traces/", "/api/eval/sets", "/admin/", "/accounts/login/", "/playground/"):
        assert expected in urls, sorted(urls)
    assert len(site) > 40


def _text(response) -> str:
    """The body as text, a streamed one (an export) read to its end."""
    data = b"".join(response.streaming_content) if response.streaming else response.content
    return data.decode(errors="replace")


def _inline_script(body: str) -> list[str]:
    found = [
        tag
        for tag in re.findall(r"<script\b[^>]*>", body, re.IGNORECASE)
        if "src=" not in tag and "application/json" not in tag
    ]
    found += re.findall(r"""\son[a-z]+\s*=\s*["']""", body, re.IGNORECASE)
    found += re.findall(r"""href\s*=\s*["']\s*javascript:""", body, re.IGNORECASE)
    return found


def test_anonymous_visitors_get_only_the_login_pages(site):
    client = Client()
    for route in site:
        response = client.get(route.url)
        assert response.status_code != 500, route
        if response.status_code == 200:
            public = route.url.lstrip("/") in ANONYMOUS_OK or route.url.startswith("/static/")
            assert public, f"{route.url} answers 200 to an anonymous visitor"
        assert SECRET not in _text(response), route


@pytest.mark.parametrize("who", ["viewer", "member2"])
def test_viewers_and_other_members_never_see_a_private_chat(site, who, request):
    client = Client()
    client.force_login(request.getfixturevalue(who))
    for route in site:
        response = client.get(route.url)
        assert response.status_code != 500, route
        body = _text(response)
        assert SECRET not in body, f"{route.url} shows {who} another member's private chat"


def test_the_owner_and_staff_do_see_it(site, private_chat, member, staff):
    session, run = private_chat
    for user in (member, staff):
        client = Client()
        client.force_login(user)
        for url in (f"/playground/{session.pk}/", f"/traces/{run.pk}/"):
            assert SECRET in _text(client.get(url)), (user, url)


def test_no_page_carries_inline_script_and_all_send_a_csp(site, staff):
    client = Client()
    client.force_login(staff)
    for route in site:
        response = client.get(route.url)
        assert response.status_code != 500, route
        if response.get("Content-Type", "").startswith("text/html") and response.status_code == 200:
            assert _inline_script(_text(response)) == [], route.url
            assert "script-src 'self'" in response["Content-Security-Policy"], route.url


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_every_unsafe_request_without_a_csrf_token_is_refused(site, staff, method):
    """A logged-in staff session (the most powerful ambient credential) without a CSRF token:
    no route may act on it (403 from the CSRF check, 405 or 404 where the method has no route)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    for route in site:
        response = getattr(client, method)(route.url, data={"x": "1"})
        # the OTLP endpoint takes bearer tokens only: a session is no credential there (401)
        refusals = (401, 403, 404, 405) if route.url.startswith(OTLP_PREFIX) else (403, 404, 405)
        assert response.status_code in refusals, (method, route.url, response.status_code)


API_METHODS = ["get", "post", "put", "patch", "delete", "head", "options"]


def _assert_api_json_error(response: Any, where: tuple[str, str]) -> None:
    assert response.status_code != 500, where
    if response.status_code < 400:
        return
    assert response["Content-Type"].startswith("application/json"), (where, response.status_code, response.content)
    if where[0] == "head":  # no body to HEAD, by HTTP
        return
    body = response.json()
    assert {"message", "field"} <= set(body) and body["message"], (where, body)


@pytest.mark.parametrize("method", API_METHODS)
def test_every_api_answer_is_json_whatever_the_route_and_method(site, member, method):
    """Every /api/ route the walk finds (a new one is covered without editing a list), every
    method, with a valid bearer token: an error is JSON ``{"message", "field"}`` (README, API),
    405 included; unknown routes are a JSON 404 whatever the method (no CSRF 403)."""
    from apps.core.auth import create_api_token

    token = create_api_token(user=member)[1]
    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {token}")
    api_routes = [r for r in site if r.url.startswith("/api/") and not r.url.startswith(("/api/docs", OTLP_PREFIX))]
    assert len(api_routes) >= 8, api_routes
    for route in api_routes:
        response = getattr(client, method)(route.url, data={"x": "1"}, content_type="application/json")
        _assert_api_json_error(response, (method, route.url))
    for url in ("/api/nonexistent", "/api/eval/nope/1", "/api/eval/runs/1/nope/"):
        response = getattr(client, method)(url, data={"x": "1"}, content_type="application/json")
        assert response.status_code == 404, (method, url, response.status_code)
        _assert_api_json_error(response, (method, url))


def test_a_method_a_route_lacks_is_a_json_405_naming_the_allowed_ones(site, member):
    from apps.core.auth import create_api_token

    token = create_api_token(user=member)[1]
    run_id = next(r.url for r in site if r.url.endswith("/resume")).split("/")[-2]
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").get(f"/api/eval/runs/{run_id}/resume")
    assert response.status_code == 405
    assert response.json() == {"message": "method GET is not allowed here (allowed: POST)", "field": None}
    assert response["Allow"] == "POST"
