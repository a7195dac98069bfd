"""The wire format without I/O: bytes in, commands out; reply values in, RESP bytes out.

Layout:
    parser          requests: RESP multibulk and inline commands, with Redis's limits and errors
    reply           reply values (errors, doubles, maps, sets, push...) and their RESP2/RESP3 bytes
    stream_entries  stream entries as RESP, for the stream commands' one-pass read paths
    numbers         string2ll, Redis's strict integer parse, for every layer above storage
    effects         Active-Active effect records (ACTIVEACTIVE APPLY ...) and vector clocks
    reply_reader    RESP replies read back, for this server's own outbound links
    _native         compiled or pure: which form of the hot modules is imported (see setup.py)

Imports no other rill package.
"""

import os as _os

from ._native import install as _install_native

# Before any submodule is imported: decides compiled or pure for the hot modules.
native = _install_native(__name__, _os.path.dirname(__file__))
