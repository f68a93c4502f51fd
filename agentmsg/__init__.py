"""agentmsg: durable, addressed messaging between coding-agent sessions."""

__version__ = "0.1.0"
TOOL = f"agentmsg/{__version__}"
