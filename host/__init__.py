"""NETBLT host library: wire codec, sans-IO protocol engine, transfers and the CLI."""
