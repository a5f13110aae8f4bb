#!/usr/bin/env python3
"""bench_read.py - bulk reading speed of hcpe/psv/hcpe3, Koma's `import` beside
cshogi's reader, on the same files in one run (docs/BENCHMARKS.md).

  PYTHONPATH=/work/cshogi-build python3 tests/data/formats/bench_read.py BUILD_DIR [COPIES]

The fixtures of this folder are repeated COPIES times (default 200) into a
scratch directory. Koma: `import --dedup 0 --quiet` into a fresh run (every
position decoded, checked by the rules, encoded as feature planes and legal
mask, written to shards and koma.db), and `import --check` (decoded and
checked by the rules, nothing encoded or stored: the same work as cshogi's
loop below).
Both as wall-clock rates and per second of CPU time (the process's own user +
system time: on a shared machine the wall clock also counts waiting for a core).
The import's wall time includes its start (opening the run) and the shard and
database commit. cshogi: numpy.fromfile, then per record Board.set_hcp / set_psfen, the move
read with move_from_move16 / move_from_psv and checked with is_legal (the
reading a Python training loader built on cshogi does before its features).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import cshogi

HERE = os.path.dirname(os.path.abspath(__file__))


def cshogi_positions(path, kind):
    t, c0 = time.perf_counter(), time.process_time()
    b = cshogi.Board()
    n = bad = 0
    if kind == 'hcpe':
        recs = np.fromfile(path, cshogi.HuffmanCodedPosAndEval)
        for r in recs:
            b.set_hcp(r['hcp'])
            bad += not b.is_legal(b.move_from_move16(int(r['bestMove16'])))
            n += 1
    elif kind == 'psv':
        recs = np.fromfile(path, cshogi.PackedSfenValue)
        for r in recs:
            b.set_psfen(r['sfen'])
            bad += not b.is_legal(b.move_from_psv(int(r['move'])))
            n += 1
    else:  # hcpe3: walk the games, every move and candidate read and checked
        data = open(path, 'rb').read()
        off = 0
        while off < len(data):
            b.set_hcp(np.frombuffer(data, np.uint8, 32, off))
            moves = int.from_bytes(data[off + 32:off + 34], 'little')
            off += 36
            for _ in range(moves):
                m16 = int.from_bytes(data[off:off + 2], 'little')
                c = int.from_bytes(data[off + 4:off + 6], 'little')
                off += 6
                for j in range(c):
                    bad += not b.is_legal(b.move_from_move16(int.from_bytes(data[off + 4 * j:off + 4 * j + 2], 'little')))
                off += 4 * c
                m = b.move_from_move16(m16)
                bad += not b.is_legal(m)
                b.push(m)
                n += 1
    dt, cpu = time.perf_counter() - t, time.process_time() - c0
    return n, dt, cpu, bad


def main():
    build = sys.argv[1]
    copies = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    tmp = tempfile.mkdtemp(prefix='koma_bench_formats_')
    try:
        print('| format | positions | Koma `import --check`: pos/s wall | CPU | Koma `import`: pos/s wall | CPU '
              '| cshogi reader: pos/s wall | CPU |')
        print('|---|---|---|---|---|---|---|---|')
        for kind in ('hcpe', 'psv', 'hcpe3'):
            src = open(os.path.join(HERE, f'games.{kind}'), 'rb').read()
            path = os.path.join(tmp, f'bench.{kind}')
            with open(path, 'wb') as f:
                for _ in range(copies):
                    f.write(src)
            run = os.path.join(tmp, f'run_{kind}')
            rates = []
            for extra in (['--check'], ['--run', run]):
                t = time.perf_counter()
                proc = subprocess.Popen([os.path.join(build, 'tools', 'import'), '--dedup', '0', '--quiet',
                                         '--shard-games', '100000'] + extra + [path], stdout=subprocess.PIPE, text=True)
                out = proc.stdout.read()
                _, status, ru = os.wait4(proc.pid, 0)
                kwall, kcpu = time.perf_counter() - t, ru.ru_utime + ru.ru_stime
                assert status == 0, out
                kpos = int(re.search(r'\((\d+) positions\)', out).group(1))
                rates += [kpos / kwall, kpos / kcpu]
            n, dt, cpu, bad = cshogi_positions(path, kind)
            assert bad == 0 and n == kpos, (bad, n, kpos)
            r = ' | '.join(f'{x:.0f}' for x in rates + [n / dt, n / cpu])
            print(f'| {kind} | {n} | {r} |')
    finally:
        shutil.rmtree(tmp)


if __name__ == '__main__':
    main()
