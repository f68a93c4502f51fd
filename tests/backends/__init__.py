"""The storage backends: the port's contract suites, run on every store; per-backend tests below."""
