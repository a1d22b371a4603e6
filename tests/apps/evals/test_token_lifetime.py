"""``evalsite token create --expires-in``: ASCII digits and at most about 10 years, else one usage
line naming the option (``١d`` was 1 day; ``3000000d`` and ``99999999999d`` were OverflowError
tracebacks). The other integer options of the CLI refuse other scripts' digits the same way."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from apps.core.auth import MAX_LIFETIME, create_api_token
from apps.evals.management.commands.token import parse_lifetime

EVALSITE = Path(sys.executable).with_name("evalsite")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("\u0661d", "is not a lifetime"),
        ("\uff11d", "is not a lifetime"),
        ("99999999999d", "over the longest lifetime"),
        ("3000000d", "over the longest lifetime"),
        ("9" * 5000 + "m", "over the longest lifetime"),
        ("3651d", "over the longest lifetime"),
        ("0d", "is not a lifetime"),
    ],
)
def test_a_bad_lifetime_is_one_usage_line_naming_the_option(tmp_path, value, says) -> None:
    done = subprocess.run(
        [str(EVALSITE), "token", "create", "--user", "admin", f"--expires-in={value}", "--db", str(tmp_path / "t.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "argument --expires-in" in last and says in last, done.stderr
    assert "Traceback" not in done.stderr


def test_lifetimes_up_to_ten_years_are_taken() -> None:
    assert parse_lifetime("3650d") == MAX_LIFETIME == timedelta(days=3650)
    assert parse_lifetime(" 12h ") == timedelta(hours=12)
    assert parse_lifetime("0090d") == timedelta(days=90)
    assert parse_lifetime("never") is None


@pytest.mark.django_db
def test_the_service_refuses_a_lifetime_over_ten_years(member) -> None:
    with pytest.raises(ValueError, match="at most 3650 days"):
        create_api_token(user=member, expires_in=MAX_LIFETIME + timedelta(days=1))


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "agents", "--set", "s", "--target", "t", "--concurrency", "\u0661"],
        ["eval", "agents", "--set", "s", "--target", "t", "--repeat", "99999999999999999999"],
        ["eval", "agents", "--set", "s", "--target", "t", "--timeout", "\u0661.\u0665"],
        ["serve", "--port", "\u0668\u0660\u0660\u0660"],
    ],
)
def test_integer_and_number_options_take_ascii_digits_only(tmp_path, argv) -> None:
    done = subprocess.run(
        [str(EVALSITE), *argv, "--db", str(tmp_path / "t.db")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "ASCII" in done.stderr.strip().splitlines()[-1], done.stderr
