from agentmsg.cli import run

run()
