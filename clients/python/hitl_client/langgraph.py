"""LangGraph's `interrupt()` answered in hitl.

A node pauses for a person with `interrupt(value)`; `run_with_hitl` runs the graph,
asks hitl each question its interrupts carry, and resumes the graph with the
answers (`Command(resume=…)`) until it ends. A value is the question's text, or a
dict: `{"question": "Deploy?", "type": "approval"}` (and `options`, `timeout`,
`priority`, `tags`). An approval resumes with `True` or `False`; a multiselect with
the list chosen; anything else with the answer's text.

Each question's idempotency key is the graph's thread and the interrupt's id, kept
in the graph's checkpoint: a process that stopped (or was killed) while it waited
calls `run_with_hitl(graph, config)` again after its restart, and waits for the
same request, answered meanwhile or not, instead of asking again.

LangGraph is not a dependency of `hitl-client`: this module imports it when used.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from . import Answer, Client

__all__ = ["run_with_hitl", "question_of"]


def question_of(value: Any) -> dict[str, Any]:
    """The hitl question an interrupt's `value` asks: `{"question", "type", …}`."""
    if isinstance(value, Mapping):
        q = {k: v for k, v in value.items() if k in ("question", "type", "options", "timeout", "priority", "tags")}
        q.setdefault("question", str(value.get("question", value)))
        q.setdefault("type", "approval" if value.get("approval") else "text")
        return q
    return {"question": str(value), "type": "text"}


def resume_value(kind: str, answer: Answer) -> Any:
    """What the interrupted node gets back for `answer`."""
    if kind in ("approval", "permission"):
        return bool(answer.approved)
    if kind == "multiselect":
        return list(answer.choices) or [c.strip() for c in answer.text.split(",") if c.strip()]
    return answer.text


def run_with_hitl(
    graph: Any,
    config: Mapping[str, Any],
    graph_input: Any = None,
    *,
    client: Optional[Client] = None,
) -> Any:
    """Invokes `graph` on `graph_input` in the thread `config` names (with `None`,
    goes on from the thread's checkpoint, as after a restart) and answers every
    interrupt in hitl until the graph ends; returns its final state's values.
    The graph needs a checkpointer (a persistent one to survive a restart)."""
    from langgraph.types import Command

    client = client or Client()
    thread = str(config.get("configurable", {}).get("thread_id", "default"))
    if graph_input is not None:
        graph.invoke(graph_input, config)
    while True:
        state = graph.get_state(config)
        interrupts = getattr(state, "interrupts", ())
        if not interrupts:
            return state.values
        resume: dict[str, Any] = {}
        for it in interrupts:
            q = question_of(it.value)
            kind = str(q.get("type", "text"))
            answer = client.ask(
                str(q["question"]),
                kind=kind,
                options=q.get("options"),
                timeout=q.get("timeout"),
                priority=q.get("priority"),
                tags=q.get("tags"),
                idempotency_key=f"langgraph:{thread}:{it.id}",
            )
            resume[it.id] = resume_value(kind, answer)
        graph.invoke(Command(resume=resume), config)
