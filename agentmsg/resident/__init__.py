"""The resident helper: the one background process agentmsg keeps per state root (``helper``), with its duties
(``renderer``, ``mirror``).  A front end of its own, beside the CLI, the hooks and the MCP server: it runs the hooks'
code and the service in the background."""
