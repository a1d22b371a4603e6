"""``evalcore.provenance.git_provenance``: the commit and dirty flag of a real git checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from evalcore.provenance import GitProvenance, git_provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git tool")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "agents").mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "agents" / "bot.py").write_text("x = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def test_a_clean_checkout_gives_its_head_and_not_dirty(checkout: Path) -> None:
    found = git_provenance(checkout / "agents")  # a folder inside the checkout
    assert found == GitProvenance(git(checkout, "rev-parse", "HEAD"), False)
    assert len(found.sha) == 40


def test_a_changed_tracked_file_is_dirty(checkout: Path) -> None:
    (checkout / "agents" / "bot.py").write_text("x = 2\n")
    sha, dirty = git_provenance(checkout)
    assert dirty is True
    assert sha == git(checkout, "rev-parse", "HEAD")


def test_an_untracked_file_does_not_make_it_dirty(checkout: Path) -> None:
    (checkout / "agents" / "new.py").write_text("y = 1\n")
    assert git_provenance(checkout).dirty is False


def test_a_new_commit_changes_the_sha(checkout: Path) -> None:
    before = git_provenance(checkout).sha
    (checkout / "agents" / "bot.py").write_text("x = 3\n")
    git(checkout, "commit", "-q", "-am", "second")
    after = git_provenance(checkout)
    assert after.sha != before and after.dirty is False


def test_outside_a_checkout_is_empty(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / ".git").write_text("")  # an invalid .git file: not a checkout (and stops git searching upward)
    assert git_provenance(plain) == GitProvenance("", False)


def test_a_missing_folder_is_empty(tmp_path: Path) -> None:
    assert git_provenance(tmp_path / "nowhere") == GitProvenance("", False)
