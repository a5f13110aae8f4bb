#!/usr/bin/python3
"""test_koma_shards.py - tools/koma_shards.py against Koma's own encoder.

Plays a tiny self-play run with the real `selfplay` binary, reads its shards
with the numpy reader, and checks every row's unpacked planes, hand values,
legal mask and policy target against the row's exact position (the shard's
position column, decoded here independently of the reader): every piece on
its plane and square in the side to move's view, nothing else on the piece
planes, the hand values, the constant plane, the policy a distribution over
legal labels only, the result one of +1/0/-1. A truncated shard and a file of
another kind are rejected with a message that names them.

Usage: test_koma_shards.py SELFPLAY_BINARY TOOLS_DIR   (exit 77: numpy missing)
"""
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("test_koma_shards: numpy is not installed for this python: skipped")
    sys.exit(77)

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print(f"FAILED: {what}")


# Hand fields (engine/types.h): shift and width per PAWN..GOLD; the most of each kind.
HAND_SHIFT = [0, 8, 12, 16, 20, 24, 28]
HAND_BITS = [5, 3, 3, 3, 2, 2, 3]
HAND_MOST = [18, 4, 4, 4, 2, 2, 4]


def hand_counts(h):
    return [(h >> HAND_SHIFT[k]) & ((1 << HAND_BITS[k]) - 1) for k in range(7)]


def check_row(s, r, koma_shards):
    pos = s.position[r]
    if s.version == 2:  # the hcp column, decoded by the reader's Python decoder (the planes: Koma's C encoder)
        board, hv, side = koma_shards.decode_hcp(pos)
        hands = [[hv[c][t] for t in range(1, 8)] for c in (0, 1)]
    else:
        board, side = pos[:81], int(pos[81])
        hands = [hand_counts(int.from_bytes(bytes(pos[84:88]), "little")),
                 hand_counts(int.from_bytes(bytes(pos[88:92]), "little"))]
    planes = s.planes[r].reshape(68, 81)
    want = np.zeros((68, 81), dtype=np.uint8)
    for sq in range(81):
        pc = int(board[sq])
        if not pc:
            continue
        colour, pt = pc >> 4, pc & 15
        view = sq if side == 0 else 80 - sq
        want[(0 if colour == side else 33) + pt - 1, view] = 1
    piece_planes = list(range(0, 14)) + list(range(33, 47))
    ok = np.array_equal(planes[piece_planes], want[piece_planes])
    check(ok, f"{s.path} row {r}: piece planes differ from the position column")
    check(planes[67].all(), f"{s.path} row {r}: plane 67 is not all ones")
    check(planes[66].min() == planes[66].max(), f"{s.path} row {r}: the in-check plane is not uniform")
    us, them = hands[side], hands[1 - side]
    want_hand = [us[k] / HAND_MOST[k] for k in range(7)] + [them[k] / HAND_MOST[k] for k in range(7)]
    check(np.allclose(s.hand[r], want_hand), f"{s.path} row {r}: hand {s.hand[r]} != {want_hand}")
    check(int(s.result[r]) in (-1, 0, 1), f"{s.path} row {r}: result {s.result[r]}")
    check(abs(float(s.root_q[r])) <= 1.0, f"{s.path} row {r}: root_q {s.root_q[r]}")
    if s.has_policy[r]:
        p = s.policy[r]
        check(abs(float(p.sum()) - 1.0) < 1e-3, f"{s.path} row {r}: policy sums to {p.sum()}")
        check(not (p > 0)[~s.legal[r]].any(), f"{s.path} row {r}: policy on an illegal label")
    return ok


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    selfplay, tools = sys.argv[1], sys.argv[2]
    sys.path.insert(0, tools)
    import koma_shards

    tmp = tempfile.mkdtemp(prefix="koma_shards_")
    try:
        run = os.path.join(tmp, "run")
        cmd = [selfplay, "--run", run, "--cycles", "1", "--games-per-cycle", "4", "--visits", "8",
               "--visits-fast", "4", "--threads", "1", "--games-per-thread", "2", "--max-ply", "60",
               "--net", "2x16", "--cpu-threads", "1", "--train-threads", "1", "--min-steps-per-cycle", "2",
               "--max-steps-per-cycle", "2", "--quiet", "--backend", "cpu"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            print(f"selfplay failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
            return 1
        shards = sorted(os.path.join(run, "shards", f) for f in os.listdir(os.path.join(run, "shards"))
                        if f.endswith(".safetensors"))
        check(len(shards) > 0, "the run wrote no shard")
        rows = games = 0
        for path in shards:
            s = koma_shards.read(path)
            check(s.version == 2, f"{path}: version {s.version}: selfplay writes version 2")
            rows += s.rows
            games += len(np.unique(s.game_id))
            check(s.planes.shape == (s.rows, 68, 9, 9), f"{path}: planes shape {s.planes.shape}")
            check(s.policy.shape == (s.rows, 2187), f"{path}: policy shape {s.policy.shape}")
            check(s.value_wdl.sum(axis=1).tolist() == [1.0] * s.rows, f"{path}: value_wdl is not one-hot")
            for r in range(s.rows):
                check_row(s, r, koma_shards)
        check(rows > 0 and games >= 4, f"{rows} rows of {games} games read")
        print(f"test_koma_shards: {rows} rows of {games} games in {len(shards)} shards checked")

        # A truncated shard and a net are refused, naming the file.
        bad = os.path.join(tmp, "truncated.safetensors")
        with open(shards[0], "rb") as f:
            blob = f.read()
        with open(bad, "wb") as f:
            f.write(blob[: len(blob) // 2])
        try:
            koma_shards.read(bad)
            check(False, "a truncated shard was read")
        except koma_shards.ShardError as e:
            check(str(e).startswith(bad), f"the error does not name the file: {e}")
        model = os.path.join(run, "models", "0000.safetensors")
        try:
            koma_shards.read(model)
            check(False, "a net was read as a shard")
        except koma_shards.ShardError as e:
            check(str(e).startswith(model) and "not a Koma shard" in str(e), f"net as shard: {e}")
        # The command line: a summary and an .npz with every array.
        npz = os.path.join(tmp, "s.npz")
        p = subprocess.run([sys.executable, os.path.join(tools, "koma_shards.py"), shards[0], "--npz", npz],
                           capture_output=True, text=True)
        check(p.returncode == 0 and "rows" in p.stdout, f"command line: {p.returncode} {p.stdout} {p.stderr}")
        with np.load(npz) as z:
            check(z["planes"].shape[1:] == (68, 9, 9), "npz planes")
        p = subprocess.run([sys.executable, os.path.join(tools, "koma_shards.py"), bad], capture_output=True, text=True)
        check(p.returncode == 1 and bad in p.stderr, f"command line on a bad file: {p.returncode} {p.stderr}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_koma_shards: {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
