"""An MCP host written with the Python MCP SDK (the `mcp` package), for the
gateway's tests: a second implementation of MCP, besides the Go SDK the
gateway is built on, talking to the gateway.

    python_host.py stdio COMMAND [ARG...]   runs the gateway and talks over its stdio
    python_host.py http URL                 talks streamable HTTP to URL
    python_host.py replay stdio|http ...    a replay of a confirmed call instead

It lists the tools, calls refund twice with the same arguments and
find_refund once, and prints what it saw as one JSON object on standard
output (the wire form of each result). ARBITER_URL and ARBITER_API_KEY are
passed on to a gateway it runs.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def wire(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def drive(read, write):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        tools = await session.list_tools()
        args = {"order_id": "order-py-1", "amount": 1250}
        first = await session.call_tool("refund", args)
        again = await session.call_tool("refund", args)
        found = await session.call_tool("find_refund", {"order_id": "order-py-1"})
        return {
            "server": wire(init)["serverInfo"]["name"],
            "tools": {t.name: t.description for t in tools.tools},
            "first": wire(first),
            "again": wire(again),
            "found": wire(found),
        }


async def drive_replay(read, write):
    """Calls refund, whose answer the upstream loses; prints that result as
    a line; waits for a line on standard input (a person confirmed it) and
    calls refund again: the replay must be a result this host accepts."""
    async with ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        args = {"order_id": "order-py-2", "amount": 700}
        lost = await session.call_tool("refund", args)
        print(json.dumps({"lost": wire(lost)}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        replay = await session.call_tool("refund", args)
        return {"replay": wire(replay)}


async def main(argv):
    global drive
    if argv and argv[0] == "replay":
        drive, argv = drive_replay, argv[1:]
    if len(argv) >= 2 and argv[0] == "stdio":
        env = {k: os.environ[k] for k in ("ARBITER_URL", "ARBITER_API_KEY") if k in os.environ}
        params = StdioServerParameters(command=argv[1], args=argv[2:], env=env)
        async with stdio_client(params) as (read, write):
            return await drive(read, write)
    if len(argv) == 2 and argv[0] == "http":
        async with streamable_http_client(argv[1]) as streams:
            return await drive(streams[0], streams[1])
    sys.exit(__doc__)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))))
