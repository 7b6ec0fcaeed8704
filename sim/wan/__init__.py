"""WAN emulation: a seeded path model (netem), a UDP relay, a TUN path between network
namespaces, and two endpoints in virtual time (virtual)."""
