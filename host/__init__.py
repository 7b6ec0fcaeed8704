"""The application: transfers of files and streams, authentication, board status, the
``netblt`` CLI and its demos. The top of the product; it drives a data path (driver)
through the protocol core (protocol), and imports no Amaranth."""
