"""The agentmsg CLI as a subprocess: commands, output, start-up cost, top."""
