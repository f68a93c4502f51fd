"""The PostgreSQL backend (``pip install 'agentmsg[postgres]'``): the port on one shared server.

Imported only when ``--store``/``AGENTMSG_STORE`` names a ``postgresql://``
URL; the plain install and the hooks never import psycopg.
"""

from agentmsg.backends.postgres.store import PgStore


def open_store(url: str) -> PgStore:
    """The store a ``postgresql://`` URL names (``agentmsg.backends.url``)."""
    return PgStore(url)
