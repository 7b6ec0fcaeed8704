"""The sans-IO protocol core: events in, actions out, time passed in.

The connection (set-up, liveness, teardown), its sender and receiver roles, rate choice,
the codec and the endpoint that joins a connection to a data path. No sockets, threads
or clocks; it imports only netblt.formats.
"""
