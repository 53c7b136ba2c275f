"""The server's side of the identity handshake, after connect and before alignment.

With ``federation.party_keys`` (one Ed25519 public key per partition: a PEM file's path or its
text) every party must sign the run id, its partition id, a fresh nonce and the keyed digest of
its file (:mod:`vflfs.federation.identity`). A party without a key, a signature that does not
verify with its partition's key (an impostor, or a node given another party's key) and two
partitions holding the same file all stop the run here, before any of a party's data (IDs,
features) has left it. Without keys a deployment run proceeds with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from flwr.serverapp import Grid
from omegaconf import DictConfig, OmegaConf

from vflfs.federation import Federation, PartyError
from vflfs.federation.identity import (
    NODE_KEY,
    KeyFileError,
    fresh_nonce,
    load_public_key,
    public_pem,
    signed_message,
)
from vflfs.protocol import IDENTIFY, IdentifyReply, IdentifyRequest

log = logging.getLogger("vflfs")

KEYS = "federation.party_keys"


class IdentityError(PartyError):
    """A party failed to prove that it is the partition it claims to be."""

    def __init__(self, party: int | None, detail: str) -> None:
        RuntimeError.__init__(self, detail)
        self.party = party
        self.operation = str(IDENTIFY)


def party_keys(values: Sequence[str] | None, num_parties: int) -> list[Ed25519PublicKey] | None:
    """``federation.party_keys`` (as typed, :class:`~vflfs.runtime.settings.FederationSettings`)
    loaded and checked: one distinct key per partition, or None."""
    if not values:
        return None
    if len(values) != num_parties:
        raise KeyFileError(
            f"{KEYS} must list one public key per partition ({num_parties}), got "
            f"{len(values)}; fix: {KEYS}=[/abs/party_0.pub,/abs/party_1.pub,...] in "
            "partition order"
        )
    keys = [load_public_key(v, f"{KEYS}[{m}]") for m, v in enumerate(values)]
    seen: dict[bytes, int] = {}
    for m, key in enumerate(keys):
        first = seen.setdefault(public_pem(key), m)
        if first != m:
            raise KeyFileError(
                f"{KEYS}[{first}] and {KEYS}[{m}] are the same key; fix: give each partition "
                "its own key pair (`vflfs keygen NAME` on each party's machine)"
            )
    return keys


def verify_parties(
    federation: Federation,
    cfg: DictConfig,
    listed: Sequence[str] | None,
    deployment: bool = False,
) -> None:
    """Refuse the run unless every party proves its partition (when ``listed``, the typed
    ``federation.party_keys``, names their keys)."""
    keys = party_keys(listed, federation.num_parties)
    if keys is None:
        if deployment:
            log.warning(
                "no party keys (%s): any node that the SuperLink admits can answer for any "
                "partition, and a duplicated party file goes unnoticed; docs/deployment.md "
                "(section 9, identity keys) shows how to set them",
                KEYS,
            )
        return
    nonces = {m: fresh_nonce() for m in range(federation.num_parties)}
    digest_key, id_column = fresh_nonce(), str(cfg.dataset.get("id_column") or "id")
    paths = _party_paths(cfg, federation.num_parties)
    requests = {
        m: IdentifyRequest(nonces[m], digest_key, id_column, paths[m] if paths else None)
        for m in nonces
    }
    replies = federation.send(IDENTIFY, requests)
    run_id = grid_run_id(federation.grid)
    for m, reply in replies.items():
        _check_signature(m, reply, keys, run_id, nonces[m])
    _check_distinct_data([bytes(replies[m].digest) for m in sorted(replies)])
    log.info("identity: all %d parties proved their partition with their keys", len(keys))


def _check_signature(
    m: int, reply: IdentifyReply, keys: Sequence[Ed25519PublicKey], run_id: int, nonce: bytes
) -> None:
    if int(reply.partition_id) != m:
        raise IdentityError(
            m,
            f"party {m} answered the identity check as partition {reply.partition_id!r}; "
            "fix: give each SuperNode its own partition-id and restart it",
        )
    signature = bytes(reply.signature)
    if not signature:
        raise IdentityError(
            m,
            f"party {m} has no identity key but {KEYS}[{m}] lists one; fix: start partition "
            f"{m}'s SuperNode with --node-config \"... {NODE_KEY}='/abs/party_{m}.key'\" (the "
            "private key of the pair whose .pub the server lists)",
        )
    message = signed_message(run_id, m, nonce, bytes(reply.digest))
    if _verifies(keys[m], signature, message):
        return
    other = [j for j, key in enumerate(keys) if j != m and _verifies(key, signature, message)]
    why = (
        f"it signed with partition {other[0]}'s key: one party answers for two partitions"
        if other
        else "the node answering for it holds another key (an impostor, or the wrong "
        f"{NODE_KEY} in its node config)"
    )
    raise IdentityError(
        m,
        f"party {m} failed the identity check: its signature does not verify with {KEYS}[{m}]; "
        f"{why}; fix: run partition {m}'s SuperNode on its owner's machine with {NODE_KEY} "
        f"naming the private key of {KEYS}[{m}], and stop any other node claiming partition-id "
        f"{m}",
    )


def _verifies(key: Ed25519PublicKey, signature: bytes, message: bytes) -> bool:
    try:
        key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def _check_distinct_data(digests: list[bytes]) -> None:
    """Two partitions with the same file (same IDs and values, any row order) are refused."""
    first: dict[bytes, int] = {}
    for m, digest in enumerate(digests):
        if not digest:
            continue
        j = first.setdefault(digest, m)
        if j != m:
            raise IdentityError(
                m,
                f"parties {j} and {m} hold the same data (the same IDs and feature values): a "
                f"party file was duplicated, or one party answers for both partitions; fix: "
                f"give partition {m} its own file (its node config data-path)",
            )


def grid_run_id(grid: Grid) -> int:
    """The run id as the parties see it (Flower's Run, or the in-process grid's)."""
    try:
        return int(grid.run.run_id)
    except (NotImplementedError, AttributeError):
        return int(grid.run_id)  # type: ignore[attr-defined]


def _party_paths(cfg: DictConfig, n: int) -> list[str] | None:
    paths = OmegaConf.select(cfg, "dataset.party_paths", default=None)
    if not paths:
        return None
    paths = OmegaConf.to_container(paths) if OmegaConf.is_config(paths) else paths
    return [str(p) for p in paths] if isinstance(paths, list) and len(paths) == n else None
