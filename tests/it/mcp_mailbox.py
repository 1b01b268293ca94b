#!/usr/bin/env python3
"""Drives `hitl mcp`'s mailbox tools with the official MCP Python SDK (PyPI `mcp`), as
a Claude Code sub-agent would: a send/recv/reply/result round between the run's two
agents, statuses, then a mailbox_ask that a person answers elsewhere (the test's
browser).

    mcp_mailbox.py HITL_BINARY PROJECT_DIR RUN_DIR

Prints one JSON object with everything seen, for the Rust test to check.
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HITL, PROJECT, RUN = sys.argv[1], sys.argv[2], sys.argv[3]
NARRATOR, SCRIBE = os.path.join(RUN, "narrator"), os.path.join(RUN, "scribe")


def seen(result):
    return {"is_error": result.is_error, "structured": result.structured_content}


async def main():
    params = StdioServerParameters(
        command=HITL, args=["mcp"], cwd=PROJECT,
        env={**os.environ, "CLAUDE_PROJECT_DIR": PROJECT})
    report = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            report["tools"] = sorted(t.name for t in tools.tools)
            call = session.call_tool
            report["status"] = seen(await call(
                "mailbox_status", {"mailbox": SCRIBE, "status": "idle"}))
            report["send"] = seen(await call("mailbox_send", {
                "mailbox": SCRIBE,
                "pairs": {"COMMIT_NUMBER": 1, "DESCRIPTION": "Add 'class' attributes"}}))
            report["recv"] = seen(await call("mailbox_recv", {"mailbox": SCRIBE}))
            report["reply"] = seen(await call("mailbox_reply", {
                "mailbox": SCRIBE,
                "pairs": {"STATUS": "SUCCESS", "COMMIT_HASH": "abc123"}}))
            report["result"] = seen(await call("mailbox_result", {"mailbox": SCRIBE}))
            report["recv_empty"] = seen(await call(
                "mailbox_recv", {"mailbox": SCRIBE, "timeout": 1}))
            print("asking", file=sys.stderr, flush=True)
            progress = []

            async def on_progress(value, total, message):
                progress.append(message)

            report["ask"] = seen(await call("mailbox_ask", {
                "mailbox": NARRATOR,
                "context": "Created commit plan with 2 commits",
                "plan": "1. parser\n2. docs",
                "options": ["Proceed with this plan", "Cancel and return to original branch"],
            }, progress_callback=on_progress))
            report["progress"] = progress
    json.dump(report, sys.stdout)


anyio.run(main)
