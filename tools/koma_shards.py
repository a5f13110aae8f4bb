#!/usr/bin/env python3
"""koma_shards.py - read Koma's self-play shards into numpy arrays (numpy only).

A shard (runs/NAME/shards/c0003_000042.safetensors) is a safetensors table of
training positions; data/shard.h documents every column. This module turns one
into the arrays a PyTorch (or any) trainer wants:

    import koma_shards
    s = koma_shards.read("runs/demo/shards/c0001_000001.safetensors")
    s.planes      # (R, 68, 9, 9) uint8 0/1: the input feature planes, unpacked
    s.hand        # (R, 14) float32: hand values (us then them, P L N S B R G)
    s.legal       # (R, 2187) bool: the legal-move mask by move label
    s.policy      # (R, 2187) float32: the search's visit distribution (rows with
                  #   no policy target, from fast searches, are all zero: s.has_policy)
    s.result      # (R,) int8: game result from the side to move, +1 won / 0 draw / -1 lost
    s.root_q      # (R,) float32: search value from the side to move, in [-1, 1]
    s.value_wdl   # (R, 3) float32: the result as win/draw/loss one-hot (Koma's value head order)
    s.ply, s.game_id, s.move, s.position   # the remaining columns as stored

Shard versions (data/shard.h, docs/DATA.md): version 1 stores the planes,
hand and legal mask; version 2 (this Koma's) stores only the exact position,
32 bytes of dlshogi's HuffmanCodedPos (s.position, (R, 32); decode_hcp below
turns one into a board), and the planes, hand and mask are made from it the
way Koma's trainer makes them: `inspect --shard FILE --expand OUT`, which
read() runs (its path: the inspect argument, $KOMA_INSPECT, build/tools/inspect
beside this file, or koma-inspect on the PATH). A version-2 position set
(imported hcpe/psv) has no game_id (-1 here) and a one-hot policy on its move.

Layout (engine/encode.h): everything is seen from the side to move (the board
rotated 180 degrees for White). Plane p, square index i = (file - 1) * 9 +
(rank - 1) in that view, is planes[r, p, i // 9, i % 9]: axis 2 is the file
(1..9), axis 3 the rank (a..i). Move label = direction * 81 + view destination
square (27 directions: 8 steps, 2 knight jumps, each plain or promoting, 7
drops). Planes 0-32 are the side to move's (pieces by type PAWN..DRAGON at
0-13, attacks 14-27, attacked by >= 1/2/3 at 28-30, pinned 31, files without
a pawn 32), 33-65 the opponent's, 66 in check, 67 ones.

Checks: sizes, offsets, shapes, dtypes and the metadata are verified against
the file (a truncated or foreign file raises ShardError naming it). The XXH3
checksums are not (numpy has no XXH3); `build/tools/inspect --shard FILE`
verifies them.

Command line:  koma_shards.py SHARD [--npz OUT.npz]   prints a summary; --npz
saves every array (compressed) for other tools.
"""

import json
import struct
import sys

import numpy as np

FEATURES_VERSION = 1
PLANES = 68
LABELS = 2187
HAND = 14

_DTYPES = {
    "F32": np.float32, "F64": np.float64, "F16": np.float16, "U8": np.uint8, "I8": np.int8,
    "U16": np.uint16, "I16": np.int16, "U32": np.uint32, "I32": np.int32, "U64": np.uint64,
    "I64": np.int64, "BOOL": np.bool_,
}


class ShardError(Exception):
    """A file that is not a readable Koma shard; the message starts with its path."""


# dlshogi's HuffmanCodedPos (cshogi's tables; data/fmt_pack.c): (code, bits) by engine piece code
# (type + 16 * colour), in hand by cshogi's HandPiece order, and the piece box.
_HCP_BOARD = [(0x00, 1), (0x01, 4), (0x03, 6), (0x07, 6), (0x0b, 6), (0x1f, 8), (0x3f, 8), (0x0f, 6), (0x00, 0),
              (0x09, 4), (0x23, 6), (0x27, 6), (0x2b, 6), (0x9f, 8), (0xbf, 8), (0x00, 0), (0x00, 0), (0x05, 4),
              (0x13, 6), (0x17, 6), (0x1b, 6), (0x5f, 8), (0x7f, 8), (0x2f, 6), (0x00, 0), (0x0d, 4), (0x33, 6),
              (0x37, 6), (0x3b, 6), (0xdf, 8), (0xff, 8), (0, 0)]
_HCP_HAND = [((0x00, 3), (0x04, 3)), ((0x01, 5), (0x11, 5)), ((0x03, 5), (0x13, 5)), ((0x05, 5), (0x15, 5)),
             ((0x07, 5), (0x17, 5)), ((0x1f, 7), (0x5f, 7)), ((0x3f, 7), (0x7f, 7))]
_HCP_BOX = [(0x02, 3), (0x09, 5), (0x0b, 5), (0x0d, 5), (0x1d, 5), (0x0f, 7), (0x2f, 7)]
_HAND_TYPE = [1, 2, 3, 4, 7, 5, 6]  # cshogi HandPiece order -> engine piece type (P L N S G B R)
KING = 8


def decode_hcp(code):
    """32 bytes of HuffmanCodedPos -> (board, hands, side): board a list of 81 engine piece codes (square
    (file - 1) * 9 + rank - 1; type + 16 * colour, 0 empty), hands[colour][piece type] counts, side 0 Black
    to move or 1 White. Raises ValueError for bytes that are no position."""
    bits = int.from_bytes(bytes(code), "little")
    pos = 0

    def take(n):
        nonlocal pos
        v = (bits >> pos) & ((1 << n) - 1)
        pos += n
        return v

    def fits(c):
        return c[1] and pos + c[1] <= 256 and ((bits >> pos) & ((1 << c[1]) - 1)) == c[0]

    side = take(1)
    kings = (take(7), take(7))
    if max(kings) > 80 or kings[0] == kings[1]:
        raise ValueError("bad king squares")
    board = [0] * 81
    board[kings[0]], board[kings[1]] = KING, KING + 16
    for sq in range(81):
        if sq in kings:
            continue
        pc = next((p for p in range(32) if fits(_HCP_BOARD[p])), None)
        if pc is None:
            raise ValueError(f"no piece code at square {sq}")
        pos += _HCP_BOARD[pc][1]
        board[sq] = pc
    hands = [[0] * 9, [0] * 9]
    while pos < 256:
        for i in range(7):
            c = next((c for c in (0, 1) if fits(_HCP_HAND[i][c])), None)
            if c is not None:
                pos += _HCP_HAND[i][c][1]
                hands[c][_HAND_TYPE[i]] += 1
                break
            if fits(_HCP_BOX[i]):
                pos += _HCP_BOX[i][1]
                break
        else:
            raise ValueError("no hand code after the board")
    return board, hands, side


def _find_inspect(inspect):
    import os
    import shutil
    for p in (inspect, os.environ.get("KOMA_INSPECT"),
              os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "tools", "inspect")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return shutil.which("koma-inspect")


def _expand(path, inspect):
    """planes, hand, legal of a version-2 shard, made by Koma's inspect --expand."""
    import os
    import subprocess
    import tempfile
    exe = _find_inspect(inspect)
    if not exe:
        raise ShardError(f"{path}: a version-2 shard: its planes are made by Koma's `inspect --expand`, which was "
                         "not found (pass inspect=, set KOMA_INSPECT, or build Koma)")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "expanded.safetensors")
        p = subprocess.run([exe, "--shard", path, "--expand", out], capture_output=True, text=True)
        if p.returncode != 0:
            raise ShardError(f"{path}: inspect --expand failed: {p.stderr.strip()}")
        meta, t = _read_safetensors(out)
    return t["planes"], t["hand"], t["legal"]


def _read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ShardError(f"{path}: {len(blob)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ShardError(f"{path}: header of {n} bytes in a file of {len(blob)}")
    try:
        header = json.loads(blob[8:8 + n])
    except ValueError as e:
        raise ShardError(f"{path}: header is not JSON ({e})") from None
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(blob)[8 + n:]
    tensors = {}
    for name, t in header.items():
        dt = _DTYPES.get(t.get("dtype"))
        if dt is None:
            raise ShardError(f"{path}: tensor '{name}' has unknown dtype {t.get('dtype')!r}")
        shape = tuple(int(x) for x in t["shape"])
        a, b = (int(x) for x in t["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (0 <= a <= b <= len(data)) or b - a != count * np.dtype(dt).itemsize:
            raise ShardError(f"{path}: tensor '{name}' offsets [{a}, {b}) do not fit shape {shape} "
                             f"in {len(data)} data bytes")
        tensors[name] = np.frombuffer(data[a:b], dtype=dt).reshape(shape)
    return meta, tensors


class Shard:
    """The arrays of one shard (see the module's docstring)."""

    def __init__(self, path, meta, cols):
        self.path = path
        self.meta = meta
        rows = int(meta["koma.rows"])
        self.rows = rows
        self.version = int(meta["koma.version"])
        planes_bytes = cols["planes"].shape[1] if rows else int(meta.get("koma.planes_bytes", 0))
        bits = np.unpackbits(cols["planes"].reshape(rows, planes_bytes), axis=1, bitorder="little")
        self.planes = bits[:, :PLANES * 81].reshape(rows, PLANES, 9, 9)
        self.hand = np.array(cols["hand"], dtype=np.float32).reshape(rows, -1)
        legal_bytes = cols["legal"].shape[1] if rows else int(meta.get("koma.legal_bytes", 0))
        if legal_bytes:
            lb = np.unpackbits(cols["legal"].reshape(rows, legal_bytes), axis=1, bitorder="little")
            self.legal = lb[:, :LABELS].astype(bool)
        else:
            self.legal = None
        off = cols["policy_offsets"].astype(np.int64)
        nnz = int(meta["koma.nnz"])
        ends = np.append(off[1:], nnz)
        if rows and (off[0] != 0 or np.any(ends < off) or ends[-1] != nnz):
            raise ShardError(f"{path}: policy_offsets are not a partition of the {nnz} policy entries")
        labels = cols["policy_label"].astype(np.int64)
        if nnz and labels.max() >= LABELS:
            raise ShardError(f"{path}: a policy label is {labels.max()}, labels are < {LABELS}")
        self.policy = np.zeros((rows, LABELS), dtype=np.float32)
        row_of = np.repeat(np.arange(rows), ends - off)
        self.policy[row_of, labels] = cols["policy_prob"]
        self.has_policy = ends > off
        self.result = np.array(cols["result"])
        self.root_q = np.array(cols["root_q"])
        self.value_wdl = np.stack([self.result == 1, self.result == 0, self.result == -1], axis=1).astype(np.float32)
        self.ply = np.array(cols["ply"])
        self.game_id = np.array(cols["game_id"]) if "game_id" in cols else np.full(rows, -1, np.int64)
        self.move = np.array(cols["move"])
        self.position = np.array(cols["position"])

    def arrays(self):
        """Every array by name (what --npz saves)."""
        out = {k: getattr(self, k) for k in ("planes", "hand", "policy", "has_policy", "result", "root_q",
                                            "value_wdl", "ply", "game_id", "move", "position")}
        if self.legal is not None:
            out["legal"] = self.legal
        return out


def _read_v2(path, meta, t, inspect):
    rows, nnz = int(meta["koma.rows"]), int(meta["koma.nnz"])
    is_set = meta.get("koma.set") == "1"
    want = {"position": (np.uint8, (rows, 32)), "result": (np.int8, (rows,)), "root_q": (np.float32, (rows,)),
            "ply": (np.uint16, (rows,)), "move": (np.uint16, (rows,))}
    if not is_set:  # the policy target as 16-bit shares of each row's largest; each game's id and row count
        games = int(meta["koma.games"])
        want.update({"policy_offsets": (np.uint32, (rows,)), "policy_label": (np.uint16, (nnz,)),
                     "policy_q16": (np.uint16, (nnz,)), "game_id": (np.int64, (games,)),
                     "game_rows": (np.uint32, (games,))})
    for name, (dt, shape) in want.items():
        a = t.get(name)
        if a is None:
            raise ShardError(f"{path}: column '{name}' is missing")
        if a.dtype != dt or a.shape != shape:
            raise ShardError(f"{path}: column '{name}' is {a.dtype}{list(a.shape)}, expected "
                             f"{np.dtype(dt)}{list(shape)}")
    cols = dict(t)
    if not is_set:  # each game's id once, with its row count: one id a row here, as version 1 stores it
        if int(cols["game_rows"].astype(np.int64).sum()) != rows:
            raise ShardError(f"{path}: game_rows add up to {int(cols['game_rows'].sum())} rows, koma.rows is {rows}")
        cols["game_id"] = np.repeat(cols["game_id"], cols["game_rows"].astype(np.int64))
    if not is_set:  # each row's counts divided by the row's sum, as data/shard.c's shard_row_probs
        off = cols["policy_offsets"].astype(np.int64)
        q = cols["policy_q16"].astype(np.float64)
        ends = np.append(off[1:], nnz)
        cs = np.concatenate([[0.0], np.cumsum(q)])
        sums = cs[ends] - cs[off] if rows else np.zeros(0)
        row_sum = np.repeat(sums, ends - off)
        # one float32 division where the sum is exact in float32 (as shard_row_probs: a visit target's floats)
        small = row_sum < (1 << 24)
        f32 = np.divide(q.astype(np.float32), row_sum.astype(np.float32), out=np.zeros(q.shape, np.float32),
                        where=(row_sum > 0) & small)
        f64 = np.divide(q, row_sum, out=np.zeros_like(q), where=(row_sum > 0) & ~small).astype(np.float32)
        cols["policy_prob"] = np.where(small, f32, f64)
    cols["planes"], cols["hand"], cols["legal"] = _expand(path, inspect)
    if is_set:  # a position's target: its move, one-hot (the label is in the legal mask's order)
        cols["policy_offsets"] = np.zeros(rows, np.uint32)
        cols["policy_label"] = np.zeros(0, np.uint16)
        cols["policy_prob"] = np.zeros(0, np.float32)
    return Shard(path, meta, cols)


def read(path, inspect=None):
    """Reads the shard at path; raises ShardError for a file that is not one. A version-2 shard's planes are
    made by Koma's inspect (see the module's docstring; inspect: its path)."""
    meta, t = _read_safetensors(path)
    if meta.get("koma.kind") != "shard":
        raise ShardError(f"{path}: not a Koma shard (koma.kind is {meta.get('koma.kind')!r})")
    if meta.get("koma.version") == "2":
        return _read_v2(path, meta, t, inspect)
    fv = int(meta.get("koma.features_version", -1))
    if fv != FEATURES_VERSION:
        raise ShardError(f"{path}: features_version {fv}; this reader knows {FEATURES_VERSION}")
    rows = int(meta["koma.rows"])
    want = {
        "planes": (np.uint8, (rows, int(meta["koma.planes_bytes"]))),
        "hand": (np.float32, (rows, int(meta["koma.hand_n"]))),
        "legal": (np.uint8, (rows, int(meta["koma.legal_bytes"]))),
        "policy_offsets": (np.uint32, (rows,)),
        "policy_label": (np.uint16, (int(meta["koma.nnz"]),)),
        "policy_prob": (np.float32, (int(meta["koma.nnz"]),)),
        "result": (np.int8, (rows,)),
        "root_q": (np.float32, (rows,)),
        "ply": (np.uint16, (rows,)),
        "game_id": (np.int64, (rows,)),
        "move": (np.uint16, (rows,)),
        "position": (np.uint8, (rows, 96)),
    }
    for name, (dt, shape) in want.items():
        a = t.get(name)
        if a is None:
            raise ShardError(f"{path}: column '{name}' is missing")
        if a.dtype != dt or a.shape != shape:
            raise ShardError(f"{path}: column '{name}' is {a.dtype}{list(a.shape)}, expected "
                             f"{np.dtype(dt)}{list(shape)}")
    if int(meta["koma.planes_bytes"]) * 8 < PLANES * 81:
        raise ShardError(f"{path}: {meta['koma.planes_bytes']} plane bytes a row hold fewer than {PLANES} planes")
    return Shard(path, meta, t)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().split("\n\n")[-1] if len(argv) >= 2 else "usage: koma_shards.py SHARD [--npz OUT.npz]")
        return 0 if len(argv) >= 2 else 2
    try:
        s = read(argv[1])
    except (ShardError, OSError, KeyError, ValueError) as e:
        print(f"koma_shards: {e}", file=sys.stderr)
        return 1
    games = len(np.unique(s.game_id))
    print(f"{s.path}: {s.rows} rows, {games} games, {int(s.has_policy.sum())} with a policy target")
    print(f"  planes {s.planes.shape} uint8, hand {s.hand.shape}, policy {s.policy.shape}, "
          f"results +{int((s.result == 1).sum())} ={int((s.result == 0).sum())} -{int((s.result == -1).sum())}")
    if len(argv) >= 4 and argv[2] == "--npz":
        np.savez_compressed(argv[3], **s.arrays())
        print(f"  saved {argv[3]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
