"""The PostgreSQL backend (``pip install 'agentmsg[postgres]'``): the port on one shared server.

Imported only when ``--store``/``AGENTMSG_STORE`` names a ``postgresql://``
URL; the plain install and the hooks never import psycopg.
"""
