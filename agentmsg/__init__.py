"""agentmsg: durable, addressed messaging between coding-agent sessions."""

__version__ = "0.1.0"
TOOL = f"agentmsg/{__version__}"
PACKAGE_DIR = __path__[0]  # the package's own folder: hooks/run and the plugin files sit beside it
