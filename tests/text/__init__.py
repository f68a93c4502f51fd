"""agentmsg.text: the boundary, the secret and injection scanners and their gates."""
