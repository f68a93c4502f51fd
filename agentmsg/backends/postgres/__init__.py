"""The PostgreSQL backend (the ``[postgres]`` extra): the port on one shared server.

Imported only when ``--store``/``AGENTMSG_STORE`` names a ``postgresql://``
URL (``agentmsg.backends.url``); the plain install and the hooks never import psycopg.
"""
