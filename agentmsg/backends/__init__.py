"""Storage backends behind ``agentmsg.ports.Store``: plain files (the default) and memory."""
