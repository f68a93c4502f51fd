"""agentmsg.domain: the pure rules (delivery envelopes, search ranking) and what the service builds on them."""
