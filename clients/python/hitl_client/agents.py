"""The OpenAI Agents SDK's tool approvals answered in hitl.

A tool made with `needs_approval=True` stops the run with an interruption;
`run_with_hitl` asks hitl to approve each such call (`Allow deploy({"version":
"1.4"})?`), approves or rejects it in the run's state (a denial's comment is what
the model reads), and runs on until no call waits.

Before it waits, the run's state goes to `save` (`RunState.to_string()`): a
process that stopped while it waited passes that string back as `state=` after
its restart, and waits for the same requests (their idempotency key is `run_id`
and the call's id), answered meanwhile or not, instead of asking again.

The Agents SDK is not a dependency of `hitl-client`: this module imports it when
used.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from . import AsyncClient

__all__ = ["run_with_hitl"]


async def run_with_hitl(
    agent: Any,
    run_input: Any = None,
    *,
    run_id: str,
    client: Optional[AsyncClient] = None,
    state: Optional[str] = None,
    save: Optional[Callable[[str], None]] = None,
    **run_kwargs: Any,
) -> Any:
    """Runs `agent` on `run_input` (or, with `state`, goes on from a saved run
    state), answering every tool approval in hitl; returns the final `RunResult`.
    `run_id` names the run across restarts; `save` gets the state to keep before
    each wait."""
    from agents import RunState, Runner

    client = client or AsyncClient()
    if state is not None:
        current = await RunState.from_string(agent, state)
        pending = current.get_interruptions()
    else:
        result = await Runner.run(agent, run_input, **run_kwargs)
        pending = list(result.interruptions)
        if not pending:
            return result
        current = result.to_state()
    while True:
        if save is not None:
            save(current.to_string())
        for item in pending:
            name = item.name or "a tool"
            answer = await client.approve(
                f"Allow {name}({item.arguments or ''})?",
                idempotency_key=f"openai-agents:{run_id}:{item.call_id}",
                context={"tool_name": name, "arguments": item.arguments},
            )
            if answer.approved:
                current.approve(item)
            else:
                why = f": {answer.comment}" if answer.comment else ""
                current.reject(
                    item,
                    rejection_message=f"Denied in hitl by {answer.responded_by or 'a person'}{why}",
                )
        result = await Runner.run(agent, current, **run_kwargs)
        pending = list(result.interruptions)
        if not pending:
            return result
        current = result.to_state()
