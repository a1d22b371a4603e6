"""The target registry imports an agents folder once and again only when a module changes."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest
from django.urls import reverse

from apps.agents.registry import TargetRegistry, discovered_targets, load_target, registry

MODULE = textwrap.dedent(
    """
    from pathlib import Path

    from evalcore.discovery import target

    with open(Path(__file__).with_suffix(".loads"), "a") as loads:  # one "x" per import
        loads.write("x")

    @target(id="echo", description="{description}")
    def echo(question):
        return question
    """
)


@pytest.fixture
def agents_dir(tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "echo.py").write_text(MODULE.format(description="first"))
    return folder


def _imports(folder) -> int:
    loads = folder / "echo.loads"
    return len(loads.read_text()) if loads.exists() else 0


def _module_of(spec):
    return next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == spec.module)


def test_a_second_lookup_does_not_import_the_folder_again(agents_dir):
    targets = TargetRegistry()
    first = targets.discovery(agents_dir).targets["echo"]
    module = _module_of(first)
    again = targets.discovery(agents_dir).targets["echo"]
    assert again is first  # the cached declaration, not a fresh import
    assert _module_of(again) is module
    assert _imports(agents_dir) == 1


def test_a_changed_module_is_imported_afresh(agents_dir):
    targets = TargetRegistry()
    first = targets.discovery(agents_dir).targets["echo"]
    path = agents_dir / "echo.py"
    path.write_text(MODULE.format(description="second"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a later mtime, whatever the clock
    reloaded = targets.discovery(agents_dir).targets["echo"]
    assert reloaded is not first
    assert (first.description, reloaded.description) == ("first", "second")
    assert _imports(agents_dir) == 2


def test_a_new_module_in_the_folder_is_seen(agents_dir):
    targets = TargetRegistry()
    assert list(targets.discovery(agents_dir).targets) == ["echo"]
    (agents_dir / "more.py").write_text(MODULE.format(description="more").replace('id="echo"', 'id="more"'))
    assert list(targets.discovery(agents_dir).targets) == ["echo", "more"]


def test_a_missing_folder_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="agents folder not found"):
        TargetRegistry().discovery(tmp_path / "nowhere")


@pytest.mark.django_db
def test_pages_import_the_agents_folder_once_until_a_module_changes(agents_dir, settings, client, member):
    settings.EVALSITE_AGENTS_DIR = str(agents_dir)
    registry.clear()
    client.force_login(member)
    for url in (reverse("evals:start_eval_run"), reverse("agents:playground"), reverse("evals:start_eval_run")):
        assert client.get(url).status_code == 200
    assert _imports(agents_dir) == 1  # three page loads, one import
    spec = load_target("echo")
    targets, problems = discovered_targets()
    assert targets["echo"] is spec and problems == []
    path = agents_dir / "echo.py"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert client.get(reverse("agents:playground")).status_code == 200
    assert _imports(agents_dir) == 2
    with pytest.raises(LookupError, match="no target 'nope' \\(known: echo\\)"):
        load_target("nope")
