"""An OpenAI Agents SDK run with a tool that needs approval, answered in hitl.

Usage: agents_run.py PROJECT API_URL STATE_FILE MARK_FILE start|resume RUN_ID. Prints
the run's final output."""

import asyncio
import sys
from pathlib import Path

from agents import Agent, function_tool, set_default_openai_api, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

from hitl_client import AsyncClient
from hitl_client.agents import run_with_hitl

project, api, state_file, mark, mode, run_id = sys.argv[1:7]


@function_tool(needs_approval=True)
def deploy(version: str) -> str:
    """Deploys a version to production."""
    Path(mark).write_text(version)
    return f"deployed {version}"


async def main() -> None:
    set_tracing_disabled(True)
    set_default_openai_api("responses")
    set_default_openai_client(AsyncOpenAI(base_url=f"{api}/v1", api_key="sk-test"), use_for_tracing=False)
    agent = Agent(name="Releaser", instructions="Deploy when asked.", tools=[deploy], model="gpt-test")
    saved = Path(state_file)

    def save(state: str) -> None:
        saved.write_text(state)

    result = await run_with_hitl(
        agent,
        "Deploy 1.4",
        run_id=run_id,
        client=AsyncClient(project=project),
        state=saved.read_text() if mode == "resume" else None,
        save=save,
    )
    print(result.final_output)


asyncio.run(main())
