"""Ask a human through hitl's broker, over the listener's native HTTP API.

A question is created (`POST /api/v1/requests`) and waited for with long polls
(`GET /api/v1/requests/{id}/wait`) until it ends: answered, denied, cancelled, timed
out or withdrawn. The listener is found as `hitl` finds it: `HITL_SERVER`, else the
project's `.helpers/.listener.json` (searched from the current folder up). The token
sent is `HITL_TOKEN`, else the ask-only token of hitl's config folder (which can ask
and wait, never answer), else none (a program of the listener's own user on loopback
may ask without one).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

__all__ = [
    "Answer",
    "AsyncClient",
    "CannotAsk",
    "Client",
    "HitlError",
    "TimedOut",
]

#: How long one long poll holds, in seconds (the server caps it).
POLL_SECONDS = 25


class HitlError(Exception):
    """Anything that went wrong asking."""


class CannotAsk(HitlError):
    """Nothing could be asked: no listener found or reachable, or the request was
    refused (`hitl ask`'s exit 3)."""


class TimedOut(HitlError):
    """Nobody answered within the question's timeout (`hitl ask`'s exit 2); the
    question is withdrawn."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"no answer in time; question {request_id} withdrawn")
        self.request_id = request_id


@dataclass(frozen=True)
class Answer:
    """How a question ended."""

    #: The request's id.
    request_id: str
    #: `answered`, `cancelled`, `timeout` or `withdrawn`.
    status: str
    #: The answer's text: the reply, the chosen option(s), `approved`/`denied`.
    text: str
    #: For approvals and permissions: whether it was approved.
    approved: Optional[bool] = None
    #: The human's comment (a denial's reason), if any.
    comment: Optional[str] = None
    #: Who answered, and where (`cli:ana`, `dashboard:ana (phone)`, `telegram:@bob`).
    responded_by: Optional[str] = None
    #: The chosen options of a multiselect.
    choices: Sequence[str] = field(default_factory=tuple)

    @property
    def exit_code(self) -> int:
        """What `hitl ask` would exit with: 0 answered (approved), 1 denied or
        cancelled, 2 timed out or withdrawn."""
        if self.status == "answered":
            return 1 if self.approved is False else 0
        if self.status == "cancelled":
            return 1
        return 2

    @property
    def ok(self) -> bool:
        """Answered, and approved where that is the question."""
        return self.exit_code == 0


def _config_dir() -> Path:
    home = os.environ.get("HITL_HOME")
    if home:
        return Path(home)
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg) / "hitl"


def _find_listener(start: Path) -> Optional[str]:
    for folder in [start, *start.parents]:
        info = folder / ".helpers" / ".listener.json"
        if info.is_file():
            try:
                url = json.loads(info.read_text()).get("http")
            except (OSError, ValueError):
                return None
            return url if isinstance(url, str) else None
    return None


def _token() -> Optional[str]:
    token = os.environ.get("HITL_TOKEN")
    if token:
        return token.strip()
    try:
        return (_config_dir() / "asker-token").read_text().strip() or None
    except OSError:
        return None


class Client:
    """Asks through one listener or server, waiting for each answer."""

    def __init__(
        self,
        base_url: Optional[str] = None,
        *,
        token: Optional[str] = None,
        agent_id: Optional[str] = None,
        agent_name: Optional[str] = None,
        project: Optional[os.PathLike[str] | str] = None,
    ) -> None:
        url = base_url or os.environ.get("HITL_SERVER")
        if not url:
            url = _find_listener(Path(project or os.getcwd()).resolve())
        if not url:
            raise CannotAsk(
                "no hitl listener found: start `hitl listen` in the project, or set "
                "HITL_SERVER"
            )
        self.base_url = url.rstrip("/")
        self.token = token if token is not None else _token()
        self.agent_id = agent_id or os.environ.get("HITL_AGENT_ID") or f"python-{os.getpid()}"
        self.agent_name = agent_name or os.environ.get("HITL_AGENT_NAME") or "Python"

    # The API, one call each.

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        if self.token:
            req.add_header("authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                said = json.loads(e.read() or b"null")
            except ValueError:
                said = None
            message = said.get("error") if isinstance(said, dict) else None
            raise CannotAsk(f"{method} {path}: {e.code} {message or e.reason}") from None
        except (urllib.error.URLError, OSError) as e:
            raise CannotAsk(f"{self.base_url} is not reachable: {e}") from None

    def create(self, question: str, kind: str = "text", **fields: Any) -> str:
        """Creates the request; returns its id (the same request's for a repeated
        `idempotency_key`)."""
        body = {
            "agent_id": self.agent_id,
            "agent_name": self.agent_name,
            "type": kind,
            "content": question,
            **{k: v for k, v in fields.items() if v is not None},
        }
        _, view = self._call("POST", "/api/v1/requests", body)
        return str(view["id"])

    def wait(self, request_id: str, timeout: Optional[float] = None) -> Answer:
        """Waits for request `request_id` to end (at most `timeout` seconds, else
        for as long as it is pending); raises `TimedOut` if it timed out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        quoted = urllib.parse.quote(request_id, safe="")
        while True:
            hold = POLL_SECONDS
            if deadline is not None:
                hold = max(0, min(hold, int(deadline - time.monotonic()) + 1))
            status, view = self._call(
                "GET", f"/api/v1/requests/{quoted}/wait?timeout={hold}", timeout=hold + 30
            )
            if status == 200:
                return _answer(request_id, view)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimedOut(request_id)

    def ask(
        self,
        question: str,
        *,
        kind: str = "text",
        options: Optional[Sequence[str]] = None,
        timeout: Optional[int] = None,
        priority: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        idempotency_key: Optional[str] = None,
        context: Optional[dict[str, Any]] = None,
    ) -> Answer:
        """Asks `question` and waits for its end. `kind`: `text`, `yesno`, `select`,
        `multiselect`, `approval`, `number`; `timeout` in seconds (none: as long as it
        takes); `idempotency_key`: the same key asks nothing new and waits for the
        request it made (after a restart)."""
        request_id = self.create(
            question,
            kind,
            options=list(options) if options is not None else None,
            timeout=timeout,
            priority=priority,
            tags=list(tags) if tags is not None else None,
            idempotency_key=idempotency_key,
            context=context,
        )
        answer = self.wait(request_id, None if timeout is None else timeout + 5)
        if answer.status == "timeout":
            raise TimedOut(request_id)
        return answer

    def approve(self, question: str, **kw: Any) -> Answer:
        """Asks for an approval: `Answer.approved` says how it went."""
        return self.ask(question, kind="approval", **kw)

    def yesno(self, question: str, **kw: Any) -> Answer:
        """Asks a yes/no question: `Answer.text` is `yes` or `no`."""
        return self.ask(question, kind="yesno", **kw)

    def select(self, question: str, options: Sequence[str], **kw: Any) -> Answer:
        """Asks for one of `options`: `Answer.text` is the one chosen."""
        return self.ask(question, kind="select", options=options, **kw)

    def multiselect(self, question: str, options: Sequence[str], **kw: Any) -> Answer:
        """Asks for any of `options`: `Answer.choices` are those chosen."""
        return self.ask(question, kind="multiselect", options=options, **kw)


def _answer(request_id: str, view: Any) -> Answer:
    a = view.get("answer") or {}
    choices = a.get("choices") or ()
    return Answer(
        request_id=request_id,
        status=str(view.get("status", a.get("status", "answered"))),
        text=str(a.get("answer", a.get("content", ""))),
        approved=a.get("approved"),
        comment=a.get("comment"),
        responded_by=a.get("responded_by"),
        choices=tuple(str(c) for c in choices),
    )


class AsyncClient:
    """`Client`'s methods, awaited (each call runs on a worker thread, so a wait
    holds no event loop)."""

    def __init__(self, base_url: Optional[str] = None, **kw: Any) -> None:
        self._sync = Client(base_url, **kw)

    async def ask(self, question: str, **kw: Any) -> Answer:
        """See `Client.ask`."""
        return await asyncio.to_thread(self._sync.ask, question, **kw)

    async def approve(self, question: str, **kw: Any) -> Answer:
        """See `Client.approve`."""
        return await asyncio.to_thread(self._sync.approve, question, **kw)

    async def yesno(self, question: str, **kw: Any) -> Answer:
        """See `Client.yesno`."""
        return await asyncio.to_thread(self._sync.yesno, question, **kw)

    async def select(self, question: str, options: Sequence[str], **kw: Any) -> Answer:
        """See `Client.select`."""
        return await asyncio.to_thread(self._sync.select, question, options, **kw)

    async def multiselect(self, question: str, options: Sequence[str], **kw: Any) -> Answer:
        """See `Client.multiselect`."""
        return await asyncio.to_thread(self._sync.multiselect, question, options, **kw)

    async def create(self, question: str, kind: str = "text", **fields: Any) -> str:
        """See `Client.create`."""
        return await asyncio.to_thread(self._sync.create, question, kind, **fields)

    async def wait(self, request_id: str, timeout: Optional[float] = None) -> Answer:
        """See `Client.wait`."""
        return await asyncio.to_thread(self._sync.wait, request_id, timeout)
