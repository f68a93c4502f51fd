"""The test suite: one folder per layer or host (text, domain, service, backends, cli, mcp, hooks, runtime,
hosts, e2e, adversarial, docs); the helpers they share are in tests/support (imported as tests.support.X)."""
