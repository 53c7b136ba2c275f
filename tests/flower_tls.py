"""TLS material for test stacks: the files ``deploy/make_certs.sh`` writes, and HTTPS checks."""

from __future__ import annotations

import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from flower_cli import FlowerError
from proc_utils import REPO, run_process

MAKE_CERTS = REPO / "deploy" / "make_certs.sh"


@dataclass(frozen=True)
class TlsFiles:
    """What ``deploy/make_certs.sh`` writes: the CA, the SuperLink's certificate and key, and
    one SuperNode key pair per party (``keys/supernode_<i>`` and ``.pub``)."""

    root: Path

    @property
    def ca(self) -> Path:
        return self.root / "certs" / "ca.crt"

    @property
    def cert(self) -> Path:
        return self.root / "certs" / "server.pem"

    @property
    def key(self) -> Path:
        return self.root / "certs" / "server.key"

    def supernode_key(self, partition_id: int) -> Path:
        return self.root / "keys" / f"supernode_{partition_id}"


def make_tls(folder: str | Path, parties: int) -> TlsFiles:
    """Run ``deploy/make_certs.sh folder parties`` (the documented script)."""
    result = run_process(["bash", str(MAKE_CERTS), str(folder), str(parties)], timeout=120)
    if result.returncode != 0:
        raise FlowerError(f"make_certs.sh failed:\n{result.stdout}{result.stderr}")
    return TlsFiles(Path(folder).absolute())


def https_opener(ca: Path | None) -> urllib.request.OpenerDirector:
    """No proxy; HTTPS verified with ``ca`` (the stack's test CA) when given."""
    handlers: list = [urllib.request.ProxyHandler({})]
    if ca is not None:
        handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
    return urllib.request.build_opener(*handlers)
