#!/usr/bin/env python3
"""Drives `hitl mcp` with the official MCP Python SDK (PyPI `mcp`), as an agent would,
while a human answers each question with `hitl answer` from another process.

    mcp_client.py HITL_BINARY PROJECT_DIR

Runs initialize, tools/list and one tools/call per case (each answered the way the
case says), and prints one JSON object with everything seen, for tests/it/mcp.rs to
check. The environment (HITL_HOME) is the test's.
"""

import json
import os
import subprocess
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HITL, PROJECT = sys.argv[1], sys.argv[2]

# (tool, arguments, `hitl answer` arguments after the id)
CASES = [
    ("ask_human", {"question": "Which database?", "type": "select",
                   "options": ["sqlite", "postgres"], "priority": "high",
                   "tags": ["db"]}, ["postgres"]),
    ("ask_human", {"question": "Which checks?", "type": "multiselect",
                   "options": ["fmt", "clippy", "test"]}, ["1,3"]),
    ("ask_human", {"question": "Name the release", "context": {"branch": "main"}},
     ["Aurora borealis"]),
    ("request_approval", {"action": "drop the staging database", "context": "it is stale"},
     ["--deny", "--comment", "not before Friday"]),
    ("permission_prompt", {"tool_name": "Bash", "input": {"command": "make deploy",
                                                         "description": "Deploy"},
                           "tool_use_id": "toolu_01"}, ["--approve"]),
    ("permission_prompt", {"tool_name": "Write",
                           "input": {"file_path": os.path.join(PROJECT, "notes.txt"),
                                     "content": "hi"}},
     ["--deny", "--comment", "write it elsewhere"]),
]


def pending():
    out = subprocess.run([HITL, "pending", "--json", "--dir", PROJECT],
                         capture_output=True, check=True)
    return json.loads(out.stdout)


async def answer_when_asked(args):
    """Waits for the one pending question, answers it with `hitl answer`, returns it."""
    deadline = time.monotonic() + 30
    while True:
        found = await anyio.to_thread.run_sync(pending)
        if found:
            question = found[0]
            done = await anyio.to_thread.run_sync(
                lambda: subprocess.run([HITL, "answer", question["id"], *args, "--dir", PROJECT],
                                       capture_output=True))
            if done.returncode != 0:
                raise RuntimeError(f"hitl answer failed: {done.stderr!r}")
            return question
        if time.monotonic() > deadline:
            raise RuntimeError("no question appeared")
        await anyio.sleep(0.05)


async def main():
    params = StdioServerParameters(
        command=HITL, args=["mcp"], cwd=PROJECT,
        env={**os.environ, "CLAUDE_PROJECT_DIR": PROJECT, "HITL_AGENT_ID": "mcp-python"})
    report = {"calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            report["server"] = init.server_info.name
            tools = await session.list_tools()
            report["tools"] = {t.name: t.input_schema for t in tools.tools}
            for tool, arguments, answer in CASES:
                seen = {}
                progress = []

                async def on_progress(value, total, message):
                    progress.append(message)

                async with anyio.create_task_group() as group:
                    async def human():
                        seen["question"] = await answer_when_asked(answer)
                    group.start_soon(human)
                    result = await session.call_tool(tool, arguments,
                                                     progress_callback=on_progress)
                report["calls"].append({
                    "tool": tool,
                    "question": seen["question"],
                    "is_error": result.is_error,
                    "text": [c.text for c in result.content],
                    "structured": result.structured_content,
                    "progress": progress,
                })
    json.dump(report, sys.stdout)


anyio.run(main)
