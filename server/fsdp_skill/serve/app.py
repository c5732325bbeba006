"""The SDK's MCPServer with every failure turned into an error a model can read and act on.

Out of the box an unknown prompt, or a prompt argument it does not take, reaches the client as
"Internal server error" (with a traceback on the server's stderr), an unknown tool or resource
echoes the caller's name back whole, however long, and an argument of the wrong type comes back as
pydantic's raw text. Here each one is an INVALID_PARAMS error (or a tool error) that quotes at most
~200 characters of the input and says what would have worked (arguments.argument_errors).
Over stdio, every line is answered: our own line reader (stdio.stdio_transport) turns each one into
messages for the session or a JSON-RPC error, where the SDK's reader dropped what it could not parse.
Tool results also carry their structured content as compact JSON text: the pretty-printed copy the
SDK sends by default roughly doubles what a client has to read.
"""

from __future__ import annotations

import json
import time
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent
from pydantic import ValidationError

from fsdp_skill.core.quoting import quote
from fsdp_skill.serve.arguments import argument_errors
from fsdp_skill.serve.query_log import QueryLog, result_ids
from fsdp_skill.serve.stdio import stdio_transport


class DocsServer(MCPServer):
    """MCPServer whose tool, resource and prompt errors are short, specific and never an internal error."""

    async def run_stdio_async(self) -> None:
        """The stdio transport, with every line answered: a reply for its id, or a JSON-RPC error."""
        async with stdio_transport() as (read_stream, write_stream):
            server = self._lowlevel_server
            await server.run(read_stream, write_stream, server.create_initialization_options())

    query_log: QueryLog | None = None  # `serve --log-queries FILE`: one line per tool call

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        if self.query_log is None:
            return await self._call_tool(name, arguments, context)
        start = time.perf_counter()
        try:
            result = await self._call_tool(name, arguments, context)
        except Exception:
            self.query_log.write(name, arguments, (time.perf_counter() - start) * 1000, True, [])
            raise
        is_error = bool(getattr(result, "is_error", False))
        ids = [] if is_error else result_ids(getattr(result, "structured_content", None))
        self.query_log.write(name, arguments, (time.perf_counter() - start) * 1000, is_error, ids)
        return result

    async def _call_tool(self, name: str, arguments: dict[str, Any], context: Context | None) -> Any:
        tools = {tool.name: tool for tool in await self.list_tools()}
        if name not in tools:
            raise ToolError(f"unknown tool {quote(name)}: call one of: {', '.join(sorted(tools))}")
        # The SDK ignores arguments a tool does not take: a misspelt filter would silently do nothing.
        takes = list((tools[name].input_schema or {}).get("properties") or {})
        for key in arguments or {}:
            if key not in takes:
                listing = ", ".join(takes) if takes else "no arguments"
                raise ToolError(f"unknown argument {quote(key)} for {name}; it takes: {listing}")
        try:
            result = await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):  # the arguments failed the input schema
                schema = tools[name].input_schema or {}
                raise ToolError(argument_errors(name, arguments or {}, exc.__cause__, schema)) from None
            raise
        return compact_text(result)

    async def read_resource(self, uri: Any, context: Context | None = None) -> Any:
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError:
            known = sorted(str(resource.uri) for resource in await self.list_resources())
            # An MCPError passes through the SDK unchanged (a ResourceError would get the whole URI as data).
            raise MCPError(INVALID_PARAMS, f"unknown resource {quote(str(uri))}: read one of: {', '.join(known)}",
                           data={"uri": quote(str(uri))}) from None

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Context | None = None) -> Any:
        prompts = {prompt.name: prompt for prompt in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"unknown prompt {quote(name)}: get one of: {', '.join(sorted(prompts))}")
        takes = [argument.name for argument in prompt.arguments or []]
        listing = ", ".join(takes) if takes else "no arguments"
        for key, value in (arguments or {}).items():
            if key not in takes:
                raise MCPError(INVALID_PARAMS, f"unknown argument {quote(key)} for prompt {name}; it takes: {listing}")
            if not isinstance(value, str):
                raise MCPError(INVALID_PARAMS, f"argument {key!r} of prompt {name} must be a string, "
                                               f"got {type(value).__name__}")
        try:
            return await super().get_prompt(name, arguments, context)
        except MCPError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK wraps any failed render in a bare ValueError
            raise MCPError(INVALID_PARAMS, f"prompt {name} could not be rendered from those arguments "
                                           f"({quote(str(exc))}); it takes: {listing}") from None


def compact_text(result: Any) -> Any:
    """The tool result with its text content replaced by the structured content as compact JSON."""
    if isinstance(result, CallToolResult) and result.structured_content is not None and not result.is_error:
        text = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
        result.content = [TextContent(type="text", text=text)]
    return result

