"""The framework adapters with the real frameworks: a LangGraph graph's interrupts
and an OpenAI Agents SDK run's tool approval, each answered with `hitl answer`,
each surviving its Python process killed between asking and the answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, List

import pytest

from conftest import Project

HERE = Path(__file__).parent / "frameworks"

if os.environ.get("CI") != "true":
    pytest.importorskip("langgraph")
    pytest.importorskip("agents")


def start(project: Project, *args: str) -> "subprocess.Popen[bytes]":
    return subprocess.Popen(
        [sys.executable, *args], cwd=project.dir, env=project.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def wait_question(project: Project, n: int) -> str:
    """The id of the newest of `n` questions asked, once there are `n`."""
    for _ in range(600):
        asked = json.loads(project.run("history", "--json")) + project.pending()
        pending = project.pending()
        if pending and len({str(q["id"]) for q in asked}) >= n:
            return str(pending[0]["id"])
        time.sleep(0.05)
    raise AssertionError(f"question {n} never came")


def finish(run: "subprocess.Popen[bytes]") -> str:
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err.decode()
    return out.decode()


def test_a_langgraph_interrupt_is_answered_and_resumed_after_a_restart(
    project: Project, tmp_path: Path
) -> None:
    project.listen()
    db = str(tmp_path / "checkpoints.db")
    script = str(HERE / "langgraph_run.py")
    first = start(project, script, db, "start", str(project.dir))
    name = wait_question(project, 1)
    # Killed while it waits; the human answers meanwhile.
    first.send_signal(signal.SIGKILL)
    first.wait()
    project.run("answer", name, "Aurora")
    # Restarted: it waits for the same request (answered), then asks the next.
    second = start(project, script, db, "resume", str(project.dir))
    deploy = wait_question(project, 2)
    assert deploy != name
    project.run("answer", deploy, "--approve")
    assert json.loads(finish(second)) == {"release": "Aurora", "deployed": True}
    assert len(json.loads(project.run("history", "--json"))) == 2, "nothing asked twice"


def test_an_agents_sdk_tool_approval_is_answered_and_resumed_after_a_restart(
    project: Project, tmp_path: Path
) -> None:
    project.listen()
    api = subprocess.Popen(
        [sys.executable, str(HERE / "responses_api.py")], stdout=subprocess.PIPE
    )
    try:
        assert api.stdout is not None
        url = f"http://127.0.0.1:{json.loads(api.stdout.readline())['port']}"
        state, mark = str(tmp_path / "run-state.json"), str(tmp_path / "deployed")
        script = str(HERE / "agents_run.py")
        first = start(project, script, str(project.dir), url, state, mark, "start", "run-1")
        call = wait_question(project, 1)
        first.send_signal(signal.SIGKILL)
        first.wait()
        project.run("answer", call, "--deny", "--comment", "release freeze until Monday")
        second = start(project, script, str(project.dir), url, state, mark, "resume", "run-1")
        assert finish(second).strip() == "done"
        assert not Path(mark).exists(), "the denied tool never ran"
        with urllib.request.urlopen(url) as r:
            requests: List[Any] = json.loads(r.read())
        assert "release freeze until Monday" in json.dumps(requests[-1])
        assert len(json.loads(project.run("history", "--json"))) == 1, "nothing asked twice"

        # Another run, approved: the tool runs.
        Path(state).unlink()
        third = start(project, script, str(project.dir), url, state, mark, "start", "run-2")
        project.answer_next("--approve")
        assert finish(third).strip() == "done"
        assert Path(mark).read_text() == "1.4"
    finally:
        api.kill()
        api.wait()
