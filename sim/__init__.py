"""Network emulation: a seeded WAN path model, virtual-time transfers, and a UDP relay."""
