"""``vflfs keygen NAME...``: a party's identity key pair (Ed25519) for the deployment handshake.

vflfs keygen keys/party_0            # writes keys/party_0.key (private) and keys/party_0.pub

The party keeps ``NAME.key`` and names it in its SuperNode's node config
(``identity-key='/abs/keys/party_0.key'``); ``NAME.pub`` goes to the server's operator, who lists
it in ``federation.party_keys`` at the party's partition index (docs/deployment.md).
"""

from __future__ import annotations

import argparse

from vflfs.federation.identity import KeyFileError, generate_key_pair


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vflfs keygen",
        description="Make a party's Ed25519 identity key pair: NAME.key (private, kept by the "
        "party, named by its node config identity-key) and NAME.pub (public, listed by the "
        "server in federation.party_keys).",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="path prefix of each key pair")
    p.add_argument("--force", action="store_true", help="replace existing key files")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for name in args.names:
        try:
            private, public = generate_key_pair(name, overwrite=args.force)
        except KeyFileError as error:
            print(f"error: {error}")
            return 1
        print(
            f"{private}  (private: keep on the party's machine)\n{public}  (public: for the server)"
        )
    return 0
