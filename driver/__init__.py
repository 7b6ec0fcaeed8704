"""NETBLT data paths: the buffer-level interface, its per-packet core, and the software path."""
