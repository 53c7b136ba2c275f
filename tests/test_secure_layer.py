"""The secure interactive layer (``secure=plaintext|paillier``; spec section 4, Algorithms 2-3)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord

from vflfs.federation import DOWN, UP
from vflfs.federation.payload import from_array
from vflfs.ml import secure_layer as sl
from vflfs.ml.models import TopModel, TopSpec, seeded
from vflfs.protocol import SECURE_BACKWARD, SECURE_FORWARD, SECURE_STEP, STEP

from helpers import run_local, tiny_config


class Recorder:
    """An observer that keeps every message (as in test_privacy)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, int, str, object]] = []

    def __call__(self, direction, party, operation, content) -> None:
        self.messages.append((direction, party, operation, content))


# Small widths keep Paillier affordable in tests (costs scale with e x width x batch).
SMALL = (
    "training.epochs=3 training.batch_size=64 split.num_parties=2 "
    "model.bottom.embedding_size=4 model.top.hidden=[8] secure.key_bits=512"
)


def _ciphers(mode: str, workers: int | None, randomness: str):
    """(party, server, party's public, server's public); forks even for small work."""
    out = []
    for _ in range(2):
        own = sl.make_cipher(mode, 512, workers, randomness)
        out += [own, sl.public_cipher(mode, own.public_bytes(), workers, randomness)]
    for cipher in out:
        cipher.min_parallel_s = 0.0
    return out[0], out[2], out[1], out[3]


@pytest.mark.parametrize(
    "mode, workers, randomness, e",
    [
        ("plaintext", 1, "djn", 5),
        ("paillier", 1, "djn", 5),
        ("paillier", 2, "djn", 7),  # forked workers; G^T packs into two plaintexts
        ("paillier", 2, "full", 3),
    ],
)
def test_protocol_computes_the_plain_layer(mode, workers, randomness, e):
    """Forward z = g W^T, dL/dg = delta W and the update W <- W - lr delta^T g, exactly as the
    plain model (float tolerance), with W split as W~ - eps between server and party; packed
    ciphertexts (5 slots at 512 bits: 12 rows in 3 plaintexts), one or two workers."""
    B = 12
    model = seeded(3, TopModel, [e, e], 2, TopSpec(hidden=(6,)))
    layer = model.interactive[1]
    W = layer.weight.detach().double()
    rng = np.random.default_rng(0)
    eps = rng.normal(size=tuple(W.shape))
    w_tilde = W.numpy() + eps
    g = torch.tensor(rng.normal(size=(B, e)), requires_grad=True)
    delta = rng.normal(size=(B, W.shape[0])) * 0.1
    party, server, party_pub, server_pub = _ciphers(mode, workers, randomness)

    wire_g, wire_t = sl.party_encrypt(party, g.detach().numpy())
    if mode == "paillier":  # G along rows (3 x e) and along columns (ceil(e / 5) x B)
        assert wire_g.shape == (3, e, 128) and wire_t.shape == (-(-e // 5), B, 128)
    cts = party_pub.from_wire(wire_g)
    y, e_s = sl.server_forward(party_pub, cts, w_tilde, B)
    z = sl.server_z(sl.party_forward(party, y, g.detach().numpy(), eps), e_s)

    reference = layer.double()(g)  # party 1's layer has no bias
    np.testing.assert_allclose(z, reference.detach().numpy(), atol=1e-4)
    (reference * torch.tensor(delta)).sum().backward()

    cts_t = party_pub.from_wire(wire_t)
    gradw, enc_delta, big_r, dw = sl.server_backward(party_pub, server, cts_t, delta, w_tilde)
    m, de, r, noise = sl.party_backward(party, server_pub, gradw, enc_delta, eps, 1.0, rng, B)
    noisy = sl.server_weight_gradient(m, big_r)
    grad_g = sl.party_gradient(sl.server_embedding_gradient(server, de, dw), r)
    np.testing.assert_allclose(grad_g, g.grad.numpy(), atol=1e-4)
    np.testing.assert_allclose(noisy - noise, layer.weight.grad.numpy(), atol=1e-4)
    assert np.abs(noisy - layer.weight.grad.numpy()).mean() > 0.1  # the server's view is noised
    lr = 0.1
    w_tilde_next = w_tilde - lr * noisy
    eps_next = eps - lr * noise
    np.testing.assert_allclose(
        w_tilde_next - eps_next, W.numpy() - lr * layer.weight.grad.numpy(), atol=1e-4
    )


def test_packing_round_trip():
    """Signed values and masks share plaintexts: slot t of block b is row b * slots + t."""
    rng = np.random.default_rng(4)
    values = sl.encode(rng.normal(size=(11, 3)) * 50)
    masks = sl.mask((11, 3))
    packed = sl.pack_rows(values, 4) + sl.pack_rows(masks, 4, sl.OFFSET)
    assert packed.shape == (3, 3)
    assert all(0 <= int(v) < 1 << (4 * sl.SLOT) for v in packed.ravel())
    np.testing.assert_array_equal(sl.unpack_rows(packed, 11, 4), values + masks)
    assert (sl.unpack_rows(packed, 11, 4) - masks == values).all()
    assert sl.PLAIN_SLOTS * sl.SLOT <= 2047  # fits below any 2048-bit n


@pytest.mark.parametrize("randomness", ["djn", "full"])
def test_returned_ciphertexts_are_rerandomised(randomness):
    """The products a non-owner returns carry fresh randomness: they differ from the bare
    homomorphic combination and between calls, and decrypt the same."""
    party, _, party_pub, _ = _ciphers("paillier", 1, randomness)
    ints = sl.pack_rows(sl.encode(np.ones((5, 2))), party.slots)
    cts = party.encrypt(ints)
    coeffs = np.array([[3, -1], [2, 5]], dtype=object)
    zeros = np.zeros((1, 2), dtype=object)
    first, second = party_pub.affine(cts, coeffs, zeros), party_pub.affine(cts, coeffs, zeros)
    bare = [party.public.combine(list(cts[0]), [int(v) for v in coeffs[:, k]]) for k in range(2)]
    assert len({*first[0], *second[0], *bare}) == 6
    same = [party.decrypt(x) for x in (first, second, np.array([bare], dtype=object))]
    np.testing.assert_array_equal(same[0], same[1])
    np.testing.assert_array_equal(same[0], same[2])
    expected = sl.encode(np.ones((5, 2))).dot(coeffs)  # positive: packs without offsets
    np.testing.assert_array_equal(same[0], sl.pack_rows(expected, party.slots))


def test_masks_hide_the_values():
    """What travels in the clear is masked: 2^(2F + 56)-wide masks on 2^(2F)-scaled values."""
    g = np.random.default_rng(1).normal(size=(8, 3))
    cipher = sl.make_cipher("plaintext", 0)
    packed = cipher.encrypt(sl.pack_rows(sl.encode(g), cipher.slots))
    y, e_s = sl.server_forward(cipher, packed, np.ones((4, 3)), len(g))
    z = sl.party_forward(cipher, y, g, np.zeros((4, 3)))  # what the party sends back
    values = np.abs(sl.ints_from_wire(z).astype(float))
    assert np.median(values) > 2.0**80
    np.testing.assert_allclose(sl.server_z(z, e_s), g @ np.ones((3, 4)), atol=1e-5)


def _run(mode, tmp_path, observers=None, strategy="vfl"):
    cfg = tiny_config(f"{SMALL} strategy={strategy} secure={mode}")
    return run_local(cfg, tmp_path / f"{strategy}-{mode}", observers=observers)


@pytest.fixture(scope="module")
def paillier_run(tmp_path_factory):
    recorder = Recorder()
    result = _run("paillier", tmp_path_factory.mktemp("secure"), [recorder])
    return result, recorder


def test_plaintext_and_paillier_train_alike(paillier_run, tmp_path):
    """Same seed: the two modes compute the same numbers up to fixed-point rounding."""
    plain = _run("plaintext", tmp_path)
    secure, _ = paillier_run
    assert plain["status"] == secure["status"]
    assert abs(plain["test_metric"] - secure["test_metric"]) <= 0.03, (plain, secure)
    assert abs(plain["val_metric"] - secure["val_metric"]) <= 0.03
    assert plain["test_metric"] > 0.6  # it learns (chance is 0.5)


def _arrays(content) -> dict[str, np.ndarray]:
    out = {}
    for record in content.values():
        if isinstance(record, ArrayRecord):
            out.update({k.split("#")[0] + "#" + k: from_array(a) for k, a in record.items()})
    return out


def test_what_each_side_receives(paillier_run):
    """Paillier mode: the server receives only ciphertext bytes and masked integers (no float
    embedding); the party receives only ciphertexts, masked integers and row indices (never W~
    or W, never delta in the clear)."""
    _, recorder = paillier_run
    nbytes = 128  # a ciphertext at 512 bits
    seen = {(d, op) for d, _, op, _ in recorder.messages}
    for op in (SECURE_STEP.name, SECURE_FORWARD.name, SECURE_BACKWARD.name):
        assert (UP, op) in seen and (DOWN, op) in seen
    assert (UP, STEP.name) not in seen
    masked_up, masked_down = [], []
    for direction, _, op, content in recorder.messages:
        if op not in {SECURE_STEP.name, SECURE_FORWARD.name, SECURE_BACKWARD.name}:
            continue
        for key, value in _arrays(content).items():
            name = key.split("#")[0]
            if name in {"batches", "selected"}:
                assert value.dtype == np.int64, (op, key)
                continue
            if name in {"open", "eval_open"}:
                assert value.dtype == np.bool_
                continue
            assert value.dtype == np.uint8, (direction, op, key, value.dtype)
            if name in {"cipher", "cipher_t", "eval_cipher", "y", "delta", "de"} or (
                name == "gradw" and direction == DOWN
            ):
                assert value.shape[-1] == nbytes, (op, key)  # ciphertexts
            else:  # masked plaintext integers: z + E_s, dL/dW + R + N, delta W - r
                assert value.shape[-1] == sl.WIRE, (op, key)
                ints = np.abs(sl.ints_from_wire(value).astype(float)).ravel()
                (masked_up if direction == UP else masked_down).append(ints)
            assert name not in {"embeddings", "eval_embeddings"}
    assert np.median(np.concatenate(masked_up)) > 2.0**80
    assert np.median(np.concatenate(masked_down)) > 2.0**80


@pytest.mark.parametrize("strategy", ["stg", "fedsdg_fs"])
def test_gated_strategies_run_secure(strategy, tmp_path):
    """Input gates and embedding gates (only open components sent) through the layer: the
    plaintext protocol trains like the plain one (SGD on the interactive weights instead of
    Adam, so within noise only)."""
    extra = " strategy.init=uniform" if strategy == "fedsdg_fs" else ""
    # a short path
    extra += " strategy.path.points=2 strategy.path.max_points=2 strategy.path.steps_per_point=12"
    results = {
        mode: run_local(
            tiny_config(f"{SMALL} strategy={strategy} secure={mode}{extra}"),
            tmp_path / mode,
        )
        for mode in ("none", "plaintext")
    }
    assert abs(results["none"]["val_metric"] - results["plaintext"]["val_metric"]) <= 0.1
    assert results["plaintext"]["val_metric"] > 0.6


@pytest.mark.parametrize("lam_server, kept", [(0, 8), (1000, 0)])
def test_the_server_prox_applies_through_the_secure_layer(lam_server, kept, tmp_path):
    """Group lasso's server-side prox runs after every step through the secure layer too (on
    the server's share W~): a threshold above any column's norm leaves no input column of the
    server's non-zero, so no embedding component counts as kept; without it all 2 x 4 do."""
    cfg = tiny_config(
        f"{SMALL} strategy=group_lasso strategy.path.enabled=false secure=plaintext "
        f"strategy.lam_server={lam_server}"
    )
    run_local(cfg, tmp_path)
    with (tmp_path / "history.csv").open() as f:
        history = list(csv.DictReader(f))
    assert [int(row["components_kept"]) for row in history] == [kept] * 3


def test_secure_needs_one_local_step(tmp_path):
    cfg = tiny_config(f"{SMALL} secure=plaintext training.local_steps=2")
    with pytest.raises(Exception, match="local_steps"):
        run_local(cfg, tmp_path)


def test_last_row_block_folds_into_fewer_ciphertexts():
    """A partly filled last block (B = 64 at 21 slots: one row) folds its column ciphertexts
    together: 32 -> 2 for the key owner to decrypt, every masked slot intact."""
    plain = sl.PlainCipher()
    packed = sl.pack_rows(sl.mask((64, 32)), plain.slots)
    folded = sl.fold_tail(plain, packed, 64)
    assert packed.shape == (4, 32) and folded.shape == (3 * 32 + 2,)
    np.testing.assert_array_equal(sl.unfold_tail(folded, 64, 32, plain.slots), packed)
    party, _, party_pub, _ = _ciphers("paillier", 1, "djn")  # 5 slots: 12 rows leave 2
    ints = sl.pack_rows(sl.mask((12, 3)), party.slots)
    cts = sl.fold_tail(party_pub, party.encrypt(ints), 12)
    assert cts.shape == (2 * 3 + 2,)
    np.testing.assert_array_equal(sl.unfold_tail(party.decrypt(cts), 12, 3, party.slots), ints)


def test_operation_counts_are_those_of_the_protocol():
    """The benchmark's counts (docs/secure_layer.md) match what the code does: B = 64 rows at
    21 slots fold to 98 and 49 ciphertexts for steps 3 and 7; the products plan wNAF digits."""
    from vflfs.benchmarks.secure_layer import problem
    from vflfs.benchmarks.secure_layer_counts import decryptions, step_counts

    plain = sl.PlainCipher()
    for rows, cols in ((64, 32), (64, 16), (12, 3), (42, 5)):
        packed = sl.pack_rows(sl.mask((rows, cols)), plain.slots)
        assert decryptions(rows, cols, plain.slots) == sl.fold_tail(plain, packed, rows).size
    counts = step_counts(problem(64, 16, 32))
    assert [counts[s]["decryptions"] for s in "367"] == [98, 32, 49]
    assert all(counts[s]["method"].startswith("naf") for s in "256")
