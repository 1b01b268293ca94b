"""The project every test runs in: a real `hitl listen` in a temporary folder,
answered with `hitl answer` as a human would. `HITL_BIN` names the hitl binary
(tools/test-all sets it)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

HITL = os.environ.get("HITL_BIN", "hitl")


class Project:
    def __init__(self, root: Path) -> None:
        self.dir = root / "project"
        self.env = dict(os.environ, HITL_HOME=str(root / "home"))
        for k in ("HITL_SERVER", "HITL_TOKEN", "HITL_AGENT_ID", "HITL_AGENT_NAME"):
            self.env.pop(k, None)
        self.run("init", str(self.dir))
        self.listener: Optional[subprocess.Popen[bytes]] = None

    def run(self, *args: str) -> str:
        out = subprocess.run(
            [HITL, *args], cwd=self.dir if self.dir.exists() else None, env=self.env,
            capture_output=True, check=True, timeout=60,
        )
        return out.stdout.decode()

    def listen(self) -> str:
        self.listener = subprocess.Popen(
            [HITL, "listen", "--ui", "none", "--http", "127.0.0.1:0"],
            cwd=self.dir, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        info = self.dir / ".helpers" / ".listener.json"
        for _ in range(300):
            if info.exists():
                try:
                    url = json.loads(info.read_text()).get("http")
                except ValueError:
                    url = None
                if url:
                    return str(url)
            time.sleep(0.05)
        raise AssertionError("the listener never wrote its address")

    def pending(self) -> List[dict]:  # type: ignore[type-arg]
        return list(json.loads(self.run("pending", "--json")))

    def answer_next(self, *args: str) -> None:
        """Answers the next question to arrive with `hitl answer ID ARGS`, from a
        thread, as a person at another terminal would."""

        def answer() -> None:
            for _ in range(400):
                waiting = self.pending()
                if waiting:
                    self.run("answer", str(waiting[0]["id"]), *args)
                    return
                time.sleep(0.05)

        threading.Thread(target=answer, daemon=True).start()

    def stop(self) -> None:
        if self.listener:
            self.listener.kill()
            self.listener.wait()


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    p = Project(tmp_path)
    yield p
    p.stop()
