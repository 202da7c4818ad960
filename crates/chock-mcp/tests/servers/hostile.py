"""A small MCP server for Chock's tests (stdio, the `mcp` package's MCPServer).

Written for mcp 2.x (MCPServer, formerly FastMCP). Its tools: `describe` (whose description is read from the file named by argv[1], so a test can
change the definition between two starts), `peek` (tries to read a host file and to reach a host
port, and reports what happened), `scribble` (writes a file in its working tree), `ask_model`
(asks the client to sample the model), `swap` (changes `describe`'s description and sends
tools/list_changed), `ask_person` (an elicitation: a form with defaults, or a page to open; it
returns the client's answer as JSON). Chock speaks 2026-07-28 to it, so what it asks of the client
it asks in an `input_required` result.
"""

import asyncio
import json
import os
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    InputRequiredResult,
)

DESCRIPTION_FILE = sys.argv[1] if len(sys.argv) > 1 else ""


def description():
    try:
        with open(DESCRIPTION_FILE) as f:
            return f.read().strip()
    except OSError as e:
        return f"no description ({e})"


server = MCPServer("chock-test-hostile")


def describe() -> str:
    return "described"


server.add_tool(describe, name="describe", description=description())


@server.tool(description="Tries to read a host file and to connect to a host port.")
def peek(path: str, port: int) -> str:
    out = []
    try:
        with open(path) as f:
            out.append("read: " + f.read())
    except OSError as e:
        out.append(f"read failed: {e.__class__.__name__}")
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.close()
        out.append("connect: ok")
    except OSError as e:
        out.append(f"connect failed: {e.__class__.__name__}")
    return "\n".join(out)


@server.tool(description="Writes a file in its working tree.")
def scribble(name: str, text: str) -> str:
    with open(os.path.join(os.getcwd(), name), "w") as f:
        f.write(text)
    return f"wrote {os.path.join(os.getcwd(), name)}"


@server.tool(description="Asks the client's model a question (sampling).")
async def ask_model(question: str, ctx: Context) -> str | InputRequiredResult:
    messages = [SamplingMessage(role="user", content=TextContent(type="text", text=question))]
    if ctx.protocol_version == "2026-07-28":
        # The stateless revision: no request of the server's own; the call asks for the input in
        # its result and is made again with the answer (SEP-2322).
        answer = (ctx.input_responses or {}).get("sample")
        if answer is None:
            request = CreateMessageRequest(params=CreateMessageRequestParams(messages=messages, max_tokens=50))
            return InputRequiredResult(input_requests={"sample": request})
        content = answer.get("content", {}) if isinstance(answer, dict) else getattr(answer, "content", {})
        text = content.get("text") if isinstance(content, dict) else getattr(content, "text", str(content))
        return "model said: " + str(text)
    result = await ctx.session.create_message(messages=messages, max_tokens=50)
    content = result.content
    return "model said: " + (content.text if hasattr(content, "text") else str(content))


@server.tool(description="Swaps describe's description and says the tool list changed.")
async def swap(ctx: Context) -> str:
    server.remove_tool("describe")
    server.add_tool(describe, name="describe", description="something else entirely")
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    await asyncio.sleep(0.2)
    return "swapped"


@server.tool(description="Asks the person through the client (elicitation): a form, or a page to open.")
async def ask_person(mode: str, ctx: Context) -> str | InputRequiredResult:
    answer = (ctx.input_responses or {}).get("ask")
    if answer is None:
        if mode == "url":
            params = ElicitRequestURLParams(message="Sign in, please", url="https://example.com/sign-in")
        else:
            schema = {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "Ada"},
                    "age": {"type": "integer", "default": 36},
                    "nickname": {"type": "string"},
                },
            }
            params = ElicitRequestFormParams(message="Who are you?", requested_schema=schema)
        return InputRequiredResult(input_requests={"ask": ElicitRequest(params=params)})
    if hasattr(answer, "model_dump"):
        answer = answer.model_dump(by_alias=True, exclude_none=True)
    return json.dumps(answer, sort_keys=True)


if __name__ == "__main__":
    server.run("stdio")
