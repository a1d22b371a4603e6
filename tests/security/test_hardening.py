"""Issue 9 §3: hardened defaults — secret key, serve's warning, TLS settings and
``check --deploy``, CSP, login throttling, password reset off, JSON API errors, websockets,
bad Host headers, the capture redirect."""

from __future__ import annotations

import io
import ipaddress
import json
import logging
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.core import mail

from apps.agents.services import start_session
from apps.core.auth import create_api_token
from apps.core.secret_key import OLD_PUBLIC_KEY, data_folder_secret_key
from apps.evals.cli.serving import host_allowed, is_loopback, machine_addresses, resolves_to_loopback_only
from apps.evals.management.commands.serve import Command as ServeCommand
from evalsite.routing import CLOSE_NO_ROUTE
from tests.apps.factories import make_eval_set

ROOT = Path(__file__).resolve().parents[2]

PRODUCTION_ENV = {
    "EVALSITE_HTTPS": "1",
    "EVALSITE_HSTS_PRELOAD": "1",
    "EVALSITE_ALLOWED_HOSTS": "evals.example.com",
    "EVALSITE_CSRF_TRUSTED_ORIGINS": "https://evals.example.com",
}
"""The production variables the README's "Deploying" section documents (the key comes from the data folder)."""


def manage(*args: str, env: dict[str, str], data_dir: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("EVALSITE_", "DJANGO_"))}
    clean.update(env, EVALSITE_DATA_DIR=str(data_dir), PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], env=clean, capture_output=True, text=True, timeout=120
    )


# -- secret key --------------------------------------------------------------------------------


def test_a_random_secret_key_is_made_once_and_kept_private(tmp_path):
    key = data_folder_secret_key(tmp_path / "data")
    path = tmp_path / "data" / "secret_key"
    assert len(key) >= 50 and key != OLD_PUBLIC_KEY
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert data_folder_secret_key(tmp_path / "data") == key
    assert data_folder_secret_key(tmp_path / "other") != key
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]  # no temp file left behind


def test_an_unwritable_data_folder_gets_a_temporary_key_and_a_warning(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    key = data_folder_secret_key(blocker / "data")
    assert len(key) >= 50 and "cannot keep a secret key" in capsys.readouterr().err


def test_check_deploy_is_clean_with_the_documented_production_environment(tmp_path):
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV, data_dir=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_warns_with_the_development_defaults(tmp_path):
    result = manage("check", "--deploy", env={}, data_dir=tmp_path)
    out = result.stdout + result.stderr
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in out, out
    pinned = manage(
        "check", "--deploy", env={**PRODUCTION_ENV, "EVALSITE_SECRET_KEY": OLD_PUBLIC_KEY}, data_dir=tmp_path
    )
    assert "security.W009" in pinned.stdout + pinned.stderr


# -- serve -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_serve_on_a_public_host_warns_and_prints_an_accepted_address(client, settings, monkeypatch):
    monkeypatch.delenv("EVALSITE_ALLOWED_HOSTS", raising=False)
    settings.ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
    err = io.StringIO()
    command = ServeCommand(stdout=io.StringIO(), stderr=err)
    shown = command.public_address("0.0.0.0")
    text = err.getvalue()
    assert "WARNING: listening on 0.0.0.0" in text and "EVALSITE_HTTPS is off" in text
    # one coherent block: the variable named once, the accepted names listed once, no contradiction
    assert text.count("EVALSITE_ALLOWED_HOSTS") == 1 and "unset (loopback names only)" not in text, text
    accepted = [line for line in text.splitlines() if "Accepted host names" in line]
    assert len(accepted) == 1, text
    # the machine's name and every non-loopback address are accepted, and so is the printed one
    name, addresses = socket.gethostname(), machine_addresses(ipv6=False)
    for host in (name, *addresses, shown):
        assert host in accepted[0], (host, text)
        assert client.get("/accounts/login/", HTTP_HOST=host).status_code == 200, host
    # the printed host is one other machines can use: not a name that resolves to loopback only
    if addresses:
        assert not resolves_to_loopback_only(shown) or shown in addresses, shown
    # loopback stays quiet
    quiet = io.StringIO()
    assert ServeCommand(stdout=io.StringIO(), stderr=quiet).public_address("127.0.0.1") == "127.0.0.1"
    assert quiet.getvalue() == ""


@pytest.mark.django_db
def test_serve_with_allowed_hosts_set_keeps_the_list_and_names_what_is_refused(settings, monkeypatch):
    monkeypatch.setenv("EVALSITE_ALLOWED_HOSTS", "evals.example.com")
    settings.ALLOWED_HOSTS = ["evals.example.com"]
    err = io.StringIO()
    shown = ServeCommand(stdout=io.StringIO(), stderr=err).public_address("0.0.0.0")
    assert shown == "evals.example.com" and settings.ALLOWED_HOSTS == ["evals.example.com"]
    text = err.getvalue()
    assert "Accepted host names (from EVALSITE_ALLOWED_HOSTS): evals.example.com" in text
    assert f"Not accepted, add them to that list to use them: {socket.gethostname()}" in text


def test_machine_addresses_are_not_loopback():
    for address in machine_addresses():
        parsed = ipaddress.ip_address(address.strip("[]"))
        assert not parsed.is_loopback and not parsed.is_link_local


def test_loopback_and_host_matching():
    assert is_loopback("localhost") and is_loopback("127.0.0.2") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5")
    assert host_allowed("a.example.com", [".example.com"]) and not host_allowed("example.org", ["example.com"])


# -- CSP, login throttling, password reset -----------------------------------------------------


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy_without_inline_script(client, viewer):
    client.force_login(viewer)
    policy = client.get("/runs/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in policy


@pytest.mark.django_db
def test_login_is_throttled_after_a_few_wrong_passwords(client, viewer):
    for _ in range(django_settings.AXES_FAILURE_LIMIT - 1):
        response = client.post("/accounts/login/", {"username": "viewer", "password": "wrong"})
        assert response.status_code == 200  # the form again, with its error
    assert client.post("/accounts/login/", {"username": "viewer", "password": "wrong"}).status_code == 429
    locked = client.post("/accounts/login/", {"username": "viewer", "password": "viewer-pass-123"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    # another account from the same address is not affected
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("other", password="other-pass-123")
    ok = client.post("/accounts/login/", {"username": "other", "password": "other-pass-123"})
    assert ok.status_code == 302


@pytest.mark.django_db
def test_password_reset_pages_are_off_without_an_email_backend(client, staff):
    for path in ("/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/done/"):
        assert client.get(path).status_code == 404
    assert client.post("/accounts/password_reset/", {"email": "a@example.com"}).status_code == 404
    assert mail.outbox == []


# -- API errors, websockets, Host header, capture redirect -------------------------------------


@pytest.mark.django_db
def test_api_errors_are_json_even_for_a_5_mb_body(client, member):
    _, raw = create_api_token(user=member)
    body = json.dumps({"set_id": 1, "target_id": "x" * (5 * 1024 * 1024)})
    anonymous = client.post("/api/eval/runs", body, content_type="application/json")
    assert anonymous.status_code == 401 and anonymous["Content-Type"].startswith("application/json")
    for headers in ({"HTTP_AUTHORIZATION": f"Bearer {raw}"}, {}):
        client.force_login(member) if not headers else None
        response = client.post("/api/eval/runs", body, content_type="application/json", **headers)
        assert response.status_code == 413, response.content[:200]
        assert response["Content-Type"].startswith("application/json")
        assert "too large" in response.json()["message"]
    garbage = client.post(
        "/api/eval/runs", b"{not json", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    assert garbage.status_code in (400, 422) and garbage["Content-Type"].startswith("application/json")


@pytest.mark.django_db(transaction=True)
async def test_an_unknown_websocket_path_is_a_clean_close():
    from evalsite.asgi import application

    communicator = WebsocketCommunicator(application, "/ws/nope/", headers=[(b"origin", b"http://testserver")])
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    assert await communicator.receive_output(timeout=5) == {"type": "websocket.close", "code": CLOSE_NO_ROUTE}
    await communicator.wait()


@pytest.mark.django_db
def test_a_bad_host_header_is_one_log_line(client):
    stream = io.StringIO()
    (handler,) = [h for h in logging.getLogger("django.security").handlers if h.filters]  # the configured one
    old = handler.setStream(stream)
    try:
        response = client.get("/accounts/login/", HTTP_HOST="evil.example")
    finally:
        handler.setStream(old)
    assert response.status_code == 400
    lines = stream.getvalue().strip().splitlines()
    assert len(lines) == 1 and "evil.example" in lines[0]


@pytest.mark.django_db
def test_capture_redirect_url_encodes_the_case_id(client, member, settings, tmp_path):
    settings.EVALSITE_AGENTS_DIR = tmp_path
    eval_set = make_eval_set(n_cases=1)
    session = start_session(user=member, target_id="echo")
    client.force_login(member)
    case_id = "a&b c#1?x=<y>"
    response = client.post(
        f"/playground/{session.pk}/capture/",
        {"eval_set": eval_set.pk, "case_id": case_id, "split": "dev", "input": '"hi"', "expected": ""},
    )
    assert response.status_code == 302
    assert response["Location"].endswith("?q=a%26b+c%231%3Fx%3D%3Cy%3E")
