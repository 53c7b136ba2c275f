"""Party identity: the key files and the message a party signs in the identity handshake.

Each party holds an Ed25519 key pair (``vflfs keygen``). Its SuperNode's node config names the
private key (``identity-key``); the server's ``federation.party_keys`` lists each partition's
public key. Before any data leaves a party, the server sends every party a fresh nonce; the party
signs :func:`signed_message` (the run id, its partition id, the nonce and a keyed digest of its
data) and the server verifies the signature with the partition's listed key
(:mod:`vflfs.server_app.identity`; the party's side: :mod:`vflfs.client_app.ops_identity`;
the messages: :mod:`vflfs.protocol.identity`).
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

NODE_KEY = "identity-key"  # node config: the party's private key file (PEM)
NONCE_BYTES = 32
_DOMAIN = b"vflfs-party-identity-v1\n"


class KeyFileError(ValueError):
    """A key file or key text could not be read; the message names it and the fix."""


def signed_message(run_id: int, partition_id: int, nonce: bytes, digest: bytes) -> bytes:
    """The bytes a party signs: bound to this run, this partition, this nonce, this data."""
    header = f"run {int(run_id)}\npartition {int(partition_id)}\n".encode()
    return _DOMAIN + header + len(nonce).to_bytes(2, "big") + nonce + digest


def fresh_nonce() -> bytes:
    return os.urandom(NONCE_BYTES)


def generate_key_pair(prefix: str | Path, overwrite: bool = False) -> tuple[Path, Path]:
    """Write ``<prefix>.key`` (private, PKCS#8 PEM, readable by its owner only) and
    ``<prefix>.pub`` (public, PEM); returns both paths."""
    private_path = Path(f"{prefix}.key")
    public_path = Path(f"{prefix}.pub")
    for path in (private_path, public_path):
        if path.exists() and not overwrite:
            raise KeyFileError(f"{path} exists; fix: choose another name, or pass --force")
    private_path.parent.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    public_path.write_bytes(public_pem(key.public_key()))
    return private_path, public_path


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in the PEM file ``path``."""
    try:
        data = Path(path).expanduser().read_bytes()
        key = serialization.load_pem_private_key(data, password=None)
    except OSError as error:
        raise KeyFileError(f"cannot read the identity key: {error.strerror}") from error
    except (ValueError, TypeError, UnsupportedAlgorithm) as error:
        raise KeyFileError(
            "the identity key is not an unencrypted PEM private key; fix: make one with "
            "`vflfs keygen NAME` and name NAME.key"
        ) from error
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError("the identity key is not an Ed25519 key; fix: use `vflfs keygen`")
    return key


def load_public_key(value: str, where: str) -> Ed25519PublicKey:
    """An Ed25519 public key given as PEM text or as the path of a PEM file (``where`` names
    the setting in errors)."""
    text = str(value).strip()
    if "-----BEGIN" in text:
        data = text.encode()
    else:
        path = Path(text).expanduser()
        try:
            data = path.read_bytes()
        except OSError as error:
            raise KeyFileError(
                f"{where}: cannot read {text!r} ({error.strerror}); fix: give the absolute path "
                "of the party's public key file (NAME.pub from `vflfs keygen`) or its PEM text"
            ) from error
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm) as error:
        raise KeyFileError(
            f"{where} is not a PEM public key; fix: give the party's NAME.pub from `vflfs keygen`"
        ) from error
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{where} is not an Ed25519 key; fix: make the pair with `vflfs keygen`")
    return key
