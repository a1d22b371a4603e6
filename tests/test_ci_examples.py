"""The CI examples of examples/ci (issue 14 §3) run here: the GitHub Actions workflow's commands
(main records the baseline, the pull request is gated on it, the summary goes to the job summary)
and the GitLab job's script, each with the shell a runner would use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.databases import subprocess_db_env

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / "examples" / "ci"


def checkout(tmp_path: Path) -> Path:
    """A working folder shaped like the repository the workflow checks out (examples/ only)."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    (folder / "examples").symlink_to(ROOT / "examples")
    return folder


def run_step(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env, "PYTHONPATH": str(ROOT), "COLUMNS": "150"}
    full["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full.get('PATH', '')}"  # the `evalsite` script
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=full, capture_output=True, text=True, timeout=300
    )


def test_the_github_workflow_records_main_then_gates_the_pull_request(tmp_path):
    workflow = yaml.safe_load((CI / "github-actions.yml").read_text())
    steps = {step.get("name"): step for step in workflow["jobs"]["eval"]["steps"]}
    cwd = checkout(tmp_path)
    summary_file = tmp_path / "step_summary.md"
    env = {**workflow["jobs"]["eval"]["env"], **subprocess_db_env(tmp_path / "ci.sqlite3")}
    env["GITHUB_STEP_SUMMARY"] = str(summary_file)

    main = run_step(steps["Eval on main (records the baseline)"]["run"], cwd, env)
    assert main.returncode == 0, main.stdout + main.stderr
    pull = run_step(steps["Eval the pull request against main's latest run"]["run"], cwd, env)
    assert pull.returncode == 0, pull.stdout + pull.stderr
    assert "(latest): 257 shared case(s)" in pull.stdout and "0 regression(s), 0 improvement(s)" in pull.stdout
    assert run_step(steps["Job summary"]["run"], cwd, env).returncode == 0

    shown = summary_file.read_text()
    assert shown.startswith("## ✅ Evalsite: gsm8k_test · gsm8k-replay · 175b_verification: all 3 gate(s) held")
    assert "### Against the baseline" in shown and "No case changed verdict." in shown
    assert (cwd / "junit.xml").exists() and (cwd / "report.json").exists()


def test_the_gitlab_job_script_on_the_default_branch_then_a_merge_request(tmp_path):
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["evals"]
    script = "\n".join(job["script"])
    cwd = checkout(tmp_path)
    env = {**job["variables"], **subprocess_db_env(tmp_path / "ci.sqlite3"), "CI_DEFAULT_BRANCH": "main"}

    main = run_step(script, cwd, {**env, "CI_COMMIT_BRANCH": "main"})
    assert main.returncode == 0, main.stdout + main.stderr
    merge_request = run_step(script, cwd, {**env, "CI_COMMIT_BRANCH": "", "CI_MERGE_REQUEST_IID": "7"})
    assert merge_request.returncode == 0, merge_request.stdout + merge_request.stderr
    assert "gate regressions<=0: PASS (actual 0)" in merge_request.stdout
    assert "all 3 gate(s) held" in (cwd / "summary.md").read_text()
