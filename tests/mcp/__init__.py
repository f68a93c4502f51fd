"""agentmsg mcp through the MCP SDK's stdio client."""
