"""The `agentmsg` command (typer): arguments to the service, output, and the one error handler (`cli.main`)."""
