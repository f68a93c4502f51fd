from agentmsg.cli.main import run

run()
