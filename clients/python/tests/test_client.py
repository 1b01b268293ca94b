"""hitl-client against a real `hitl listen` in a temporary project (conftest.py),
answered with `hitl answer` as a human would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from conftest import Project
from hitl_client import AsyncClient, CannotAsk, Client, TimedOut


def test_a_question_is_answered_with_the_humans_text(project: Project) -> None:
    project.listen()
    hitl = Client(project=project.dir, agent_name="Release bot")
    project.answer_next("release/2.0")
    answer = hitl.ask("Which branch do I release from?", timeout=60)
    assert (answer.status, answer.text, answer.exit_code) == ("answered", "release/2.0", 0)
    assert answer.responded_by and answer.responded_by.startswith("cli:")
    asked = json.loads(project.run("history", "--json"))[0]
    assert asked["agent_name"] == "Release bot"


def test_an_approval_denied_with_a_reason(project: Project) -> None:
    project.listen()
    hitl = Client(project=project.dir)
    project.answer_next("--deny", "--comment", "not on a Friday")
    answer = hitl.approve("Deploy 1.4 to production?", timeout=60)
    assert answer.approved is False
    assert answer.comment == "not on a Friday"
    assert (answer.ok, answer.exit_code) == (False, 1)


def test_a_choice_and_a_yes(project: Project) -> None:
    project.listen()
    hitl = Client(project=project.dir)
    project.answer_next("2")
    assert hitl.select("Which database?", ["PostgreSQL", "MySQL"], timeout=60).text == "MySQL"
    project.answer_next("y")
    assert hitl.yesno("Retry the job?", timeout=60).text == "yes"


def test_no_answer_in_time_raises(project: Project) -> None:
    project.listen()
    with pytest.raises(TimedOut):
        Client(project=project.dir).ask("Anyone?", timeout=1)


def test_without_a_listener_nothing_is_asked(project: Project, tmp_path: Path) -> None:
    with pytest.raises(CannotAsk, match="no hitl listener"):
        Client(project=tmp_path / "elsewhere")
    with pytest.raises(CannotAsk, match="not reachable"):
        Client("http://127.0.0.1:9").ask("Anyone?")


def test_a_restarted_asker_waits_for_the_same_request(project: Project) -> None:
    """The id kept in the run's state, or the same idempotency key, re-attaches
    after the Python process restarts: nothing is asked twice."""
    project.listen()
    first = Client(project=project.dir)
    request_id = first.create("Name the release?", idempotency_key="run-7-step-3")
    # The process restarts: a new client, the same key.
    again = Client(project=project.dir)
    assert again.create("Name the release?", idempotency_key="run-7-step-3") == request_id
    project.answer_next("Aurora")
    assert again.wait(request_id).text == "Aurora"
    assert len(json.loads(project.run("history", "--json"))) == 1


def test_the_ask_only_token_asks_and_waits(project: Project) -> None:
    project.listen()
    token = (Path(project.env["HITL_HOME"]) / "asker-token").read_text().strip()
    hitl = Client(project=project.dir, token=token)
    project.answer_next("ok")
    assert hitl.ask("Proceed?", timeout=60).text == "ok"


def test_the_async_client(project: Project) -> None:
    project.listen()
    hitl = AsyncClient(project=project.dir)
    project.answer_next("--approve")
    answer = asyncio.run(hitl.approve("Merge it?", timeout=60))
    assert answer.approved is True and answer.ok
