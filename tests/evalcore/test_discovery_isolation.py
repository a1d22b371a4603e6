"""Discovery leaves the process as it found it: ``sys.path`` untouched, the modules' own
``TargetSpec`` objects unchanged; siblings import each other relatively."""

from __future__ import annotations

import sys
import textwrap

from evalcore.discovery import TargetSpec, discover_targets


def _folder(tmp_path, name="agents"):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "_helpers.py").write_text("GREETING = 'hello'\n")
    (folder / "agent.py").write_text(
        textwrap.dedent(
            """
            from evalcore.discovery import TargetSpec

            from ._helpers import GREETING

            spec = TargetSpec(id="greeter", target=lambda question: f"{GREETING} {question}")
            """
        )
    )
    return folder


def test_discovery_never_changes_sys_path_and_siblings_import_relatively(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    before = list(sys.path)
    seen_paths = []
    real_exec = sys.modules["importlib.util"].module_from_spec

    def watching(spec):
        seen_paths.append(list(sys.path))
        return real_exec(spec)

    monkeypatch.setattr("importlib.util.module_from_spec", watching)
    found = discover_targets(folder)
    assert found.problems == []
    assert sys.path == before and all(p == before for p in seen_paths)
    assert str(folder) not in sys.path
    assert found.targets["greeter"].target("x") == "hello x"


def test_the_modules_own_declaration_is_not_written_to(tmp_path):
    folder = _folder(tmp_path)
    found = discover_targets(folder)
    spec = found.targets["greeter"]
    assert spec.module == str(folder / "agent.py")
    module = next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == spec.module)
    declared = module.spec
    assert isinstance(declared, TargetSpec) and declared is not spec
    assert declared.module == ""  # as the module declared it


def test_two_folders_with_the_same_helper_name_do_not_share_it(tmp_path):
    one, two = _folder(tmp_path, "one"), _folder(tmp_path, "two")
    (two / "_helpers.py").write_text("GREETING = 'hi'\n")
    assert discover_targets(one).targets["greeter"].target("x") == "hello x"
    assert discover_targets(two).targets["greeter"].target("x") == "hi x"


def test_a_declaration_imported_by_a_sibling_counts_once(tmp_path):
    folder = _folder(tmp_path)
    (folder / "zz_reexport.py").write_text("from .agent import spec\n")
    found = discover_targets(folder)
    assert found.problems == [] and list(found.targets) == ["greeter"]
    assert found.targets["greeter"].module == str(folder / "agent.py")
