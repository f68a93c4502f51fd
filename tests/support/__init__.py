"""Helpers the tests share (imported as tests.support.X): CLI and hook runners, the store facade, PostgreSQL."""
