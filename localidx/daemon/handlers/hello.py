"""``daemon/hello``: the handshake. Versions and capabilities; a mismatch answers VERSION_MISMATCH ("restart me").

A client names the protocol version it speaks and, optionally, the package version it wants: the CLI and the git
hooks pass theirs, so a daemon left running across an upgrade is restarted by the first client of the new version
(dmypy's rule). Clients that only speak the protocol (an editor extension) leave ``package_version`` out.

``settings_fingerprint`` (``config.fingerprint``) is compared the same way: a daemon keeps the settings it started
with, so a client whose settings differ has it restarted rather than be served under the old ones. Settings only a
client reads (``config.CLIENT_ONLY``: the LLM endpoint and model) are not in the fingerprint. The refusal's data
carries the daemon's per-setting digests (``settings``), so that the client can name the settings that differ, and
the daemon's log records the refusal.

``max_frame_bytes`` sets this connection's response limit: a client that reads large frames asks for up to
``MAX_NEGOTIATED_FRAME_BYTES`` and then gets any response up to that size; the limit never goes below
``MAX_FRAME_BYTES``, and the result says what applies.

The capabilities are the names in ``protocol.METHODS``, sorted: the routing table (``daemon.routes``) serves exactly
those, a test checks it, and a handler does not read the table that imports it.
"""

from __future__ import annotations

import logging

from localidx import protocol
from localidx.protocol import VERSION_MISMATCH, ProtocolError

log = logging.getLogger(__name__)


def handle(daemon, params: dict) -> dict:
    """Compare versions; answer with the daemon's identity and the methods it serves."""
    versions = {"protocol_version": protocol.PROTOCOL_VERSION, "package_version": daemon.version}
    if params["protocol_version"] != protocol.PROTOCOL_VERSION:
        raise ProtocolError(VERSION_MISMATCH, f"the daemon speaks protocol {protocol.PROTOCOL_VERSION}, the client "
                                              f"{params['protocol_version']}: restart the daemon", versions)
    wanted = params.get("package_version")
    if wanted is not None and wanted != daemon.version:
        raise ProtocolError(VERSION_MISMATCH, f"the daemon runs localidx {daemon.version}, the client {wanted}: "
                                              f"restart the daemon", versions)
    wanted = params.get("settings_fingerprint")
    if wanted is not None and wanted != daemon.settings_fingerprint:
        from localidx.config import setting_digests

        log.warning("a client runs with other settings (fingerprint %s, this daemon's %s): it will restart the "
                    "daemon", wanted, daemon.settings_fingerprint)
        raise ProtocolError(VERSION_MISMATCH, "the daemon runs with other settings than the client's (an edited "
                                              ".localidx.toml or LOCALIDX_* variable): restart the daemon",
                            {**versions, "settings": setting_digests(daemon.settings)})
    limit = protocol.MAX_FRAME_BYTES
    session = daemon.session()
    if session is not None:
        if "max_frame_bytes" in params:
            session.max_frame_bytes = max(protocol.MAX_FRAME_BYTES, params["max_frame_bytes"])
        limit = session.max_frame_bytes
    return {**versions, "pid": daemon.pid, "root": str(daemon.root), "index": str(daemon.paths.state),
            "capabilities": sorted(protocol.METHODS), "max_frame_bytes": limit,
            "max_request_bytes": protocol.MAX_FRAME_BYTES, "daemon": daemon.describe()}
