"""NETBLT data paths behind the protocol core's buffer-level interface: the per-packet
core (in C, with its Python twin), the software path over sockets, and the board path
over the host link."""
