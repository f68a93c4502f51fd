"""agentmsg.service: the use cases over any store (identity and lifecycle rules)."""
