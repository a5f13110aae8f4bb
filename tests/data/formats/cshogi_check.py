#!/usr/bin/env python3
"""cshogi_check.py - reads files Koma's `export` wrote with cshogi and checks
them the way dlshogi's and YaneuraOu's loaders would use them:

  PYTHONPATH=/work/cshogi-build python3 tests/data/formats/cshogi_check.py FILE.hcpe|FILE.hcpe3|FILE.psv ...

Every position decodes (set_hcp / set_psfen) and cshogi encodes the board it
read back to the same 32 bytes (to_hcp / to_psfen: Koma writes what cshogi
writes), every move and hcpe3 candidate is legal there (move_from_move16 /
move_from_psv, is_legal), hcpe3 games replay to their end, result bytes and
game_result are in range. Prints a count per file; exits 1 on the first
mismatch.
"""
import sys

import numpy as np
import cshogi


def fail(msg):
    print(msg)
    sys.exit(1)


def check(path):
    b = cshogi.Board()
    buf = np.zeros(32, np.uint8)
    n = 0
    if path.endswith('.hcpe') or path.endswith('.psv'):
        hcpe = path.endswith('.hcpe')
        recs = np.fromfile(path, cshogi.HuffmanCodedPosAndEval if hcpe else cshogi.PackedSfenValue)
        for i, r in enumerate(recs):
            code = r['hcp'] if hcpe else r['sfen']
            (b.set_hcp if hcpe else b.set_psfen)(code)
            (b.to_hcp if hcpe else b.to_psfen)(buf)
            if not np.array_equal(buf, code):
                fail(f'{path}: record {i + 1}: cshogi encodes {b.sfen()} otherwise')
            m = b.move_from_move16(int(r['bestMove16'])) if hcpe else b.move_from_psv(int(r['move']))
            if not b.is_legal(m):
                fail(f'{path}: record {i + 1}: move not legal in {b.sfen()}')
            if hcpe and (int(r['gameResult']) & 3) == 3 or not hcpe and int(r['game_result']) not in (-1, 0, 1):
                fail(f'{path}: record {i + 1}: bad result')
            n += 1
    else:
        data = open(path, 'rb').read()
        off = rec = 0
        while off < len(data):
            rec += 1
            code = np.frombuffer(data, np.uint8, 32, off)
            b.set_hcp(code)
            b.to_hcp(buf)
            if not np.array_equal(buf, code):
                fail(f'{path}: game {rec}: cshogi encodes the start {b.sfen()} otherwise')
            moves = int.from_bytes(data[off + 32:off + 34], 'little')
            if data[off + 34] & 3 == 3:
                fail(f'{path}: game {rec}: bad result')
            off += 36
            for j in range(moves):
                m16, c = int.from_bytes(data[off:off + 2], 'little'), int.from_bytes(data[off + 4:off + 6], 'little')
                off += 6
                for k in range(c):
                    if not b.is_legal(b.move_from_move16(int.from_bytes(data[off + 4 * k:off + 4 * k + 2], 'little'))):
                        fail(f'{path}: game {rec} move {j + 1}: candidate {k + 1} not legal')
                off += 4 * c
                m = b.move_from_move16(m16)
                if not b.is_legal(m):
                    fail(f'{path}: game {rec} move {j + 1}: not legal in {b.sfen()}')
                b.push(m)
                n += 1
    print(f'{path}: {n} positions read by cshogi, every code as cshogi writes it, every move legal')


if __name__ == '__main__':
    for p in sys.argv[1:]:
        check(p)
