"""netblt: NETBLT (RFC 998) bulk transfer with an FPGA data path.

This checkout is the package; each top-level folder is a layer that imports only the
layers below it (docs/architecture.md, enforced by tests/test_layers.py):

    bench/                         benchmarks: everything below
    host/                          the application and the ``netblt`` CLI
    sim/wan/, sim/rtl/             WAN emulation; the gateware under Verilator
    driver/          hw/           data paths (software, board) | boards and bitstreams
    protocol/        gateware/     the sans-IO protocol core | the data path in Amaranth
    formats/                       the ground: every format, as data
"""
