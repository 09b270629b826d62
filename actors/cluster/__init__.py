"""How a ``Cluster`` (``actors.api``) reaches its bodies: the ``Link`` port, its Ray and
in-process adapters, and what a kept cluster records for other processes. Neither adapter is
imported here: only what asks for Ray pays for importing it."""
