"""The PostgreSQL store (the session's throwaway server, tests/support/pg.py)."""
