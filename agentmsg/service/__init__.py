"""The one application layer: every front end (CLI, hooks, MCP) goes through here to a store."""
