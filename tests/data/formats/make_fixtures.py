#!/usr/bin/env python3
"""make_fixtures.py - the hcpe, hcpe3 and psv fixtures of tests/data/formats/,
written and read back by cshogi (github:TadaoYamaoka/cshogi, built from its
public source; see README.md in this folder), the library dlshogi's tools use.

  PYTHONPATH=/work/cshogi-build python3 tests/data/formats/make_fixtures.py tests/data/formats

Writes games.hcpe, games.hcpe3, games.psv (a few games of seeded random
play, biased to captures so that hands fill up; one from a handicap start so
that the piece box is used) and expected.txt: what cshogi reads back from
those files, record by record (SFEN, move, result, eval, visits), which
tests/record/test_formats.c compares with Koma's reading. Also bad.hcpe,
bad.psv, bad.hcpe3: the same records with a few broken on purpose (listed in
expected.txt as "bad <file> <record>"), to check that exactly those are
rejected and named.

Layouts: cshogi's HuffmanCodedPosAndEval and PackedSfenValue dtypes; hcpe3
as dlshogi's cppshogi.h HuffmanCodedPosAndEval3 + MoveInfo + MoveVisits.
"""
import random
import sys

import numpy as np
import cshogi

HCPE3_HEAD = np.dtype([('hcp', np.uint8, 32), ('moveNum', '<u2'), ('result', 'u1'), ('opponent', 'u1')])
MOVE_INFO = np.dtype([('selectedMove16', '<u2'), ('eval', '<i2'), ('candidateNum', '<u2')])
MOVE_VISITS = np.dtype([('move16', '<u2'), ('visitNum', '<u2')])
assert HCPE3_HEAD.itemsize == 36 and MOVE_INFO.itemsize == 6 and MOVE_VISITS.itemsize == 4
assert cshogi.HuffmanCodedPosAndEval.itemsize == 38 and cshogi.PackedSfenValue.itemsize == 40

STARTS = [None, None, None, 'lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1']


def play(rng, start, plies):
    board = cshogi.Board() if start is None else cshogi.Board(start)
    moves = []
    while len(moves) < plies and not board.is_game_over():
        legal = list(board.legal_moves)
        caps = [m for m in legal if board.piece(cshogi.move_to(m)) != 0]
        m = rng.choice(caps) if caps and rng.random() < 0.6 else rng.choice(legal)
        moves.append(m)
        board.push(m)
    if board.is_game_over():
        result = 2 if board.turn == cshogi.BLACK else 1  # the side to move is mated
    else:
        result = None
    return moves, result


def main(out):
    rng = random.Random(20261202)
    hcpe, psv, hcpe3 = [], [], bytearray()
    games = []
    endings = [1, 2 | 0, 0 | 16, 0 | 4, 1 | 8, 2 | 4]
    for gi, start in enumerate(STARTS):
        moves, mated = play(rng, start, rng.randint(90, 140))
        rb = mated if mated is not None else endings[gi % len(endings)]
        games.append((start, moves, rb))
    for start, moves, rb in games:
        board = cshogi.Board() if start is None else cshogi.Board(start)
        head = np.zeros(1, HCPE3_HEAD)
        board.to_hcp(head['hcp'][0])
        head['moveNum'] = len(moves)
        head['result'] = rb
        hcpe3 += head.tobytes()
        winner = rb & 3
        for ply, m in enumerate(moves):
            # evals: dlshogi's mate is +-30000; Koma keeps a value in a float, so integers
            # past about +-6500 (psv) / +-8000 (dlshogi) do not all come back (fmt_pack.h)
            ev = rng.choice([rng.randint(-3000, 3000), rng.randint(-300, 300), 30000, -30000]) if ply % 7 else 0
            rec = np.zeros(1, cshogi.HuffmanCodedPosAndEval)
            board.to_hcp(rec['hcp'][0])
            rec['eval'] = ev
            rec['bestMove16'] = cshogi.move16(m)
            rec['gameResult'] = rb
            hcpe.append(rec)
            p = np.zeros(1, cshogi.PackedSfenValue)
            board.to_psfen(p['sfen'][0])
            p['score'] = ev if abs(ev) < 30000 else (32000 if ev > 0 else -32000)  # YaneuraOu's mate: 32000
            p['move'] = cshogi.move16_to_psv(cshogi.move16(m))
            p['gamePly'] = board.move_number + ply  # gamePly as a generator counts (any value >= 1 is kept)
            stm_won = 0 if winner == 0 else (1 if (winner == 1) == (board.turn == cshogi.BLACK) else -1)
            p['game_result'] = stm_won
            psv.append(p)
            legal = list(board.legal_moves)
            info = np.zeros(1, MOVE_INFO)
            info['selectedMove16'] = cshogi.move16(m)
            info['eval'] = ev
            if ply % 5 == 4:
                cands = []  # a move dlshogi does not train on
            else:
                k = min(len(legal), rng.randint(1, 12))
                cands = rng.sample(legal, k)
                if m not in cands:
                    cands[0] = m
            info['candidateNum'] = len(cands)
            hcpe3 += info.tobytes()
            if cands:
                mv = np.zeros(len(cands), MOVE_VISITS)
                mv['move16'] = [cshogi.move16(c) for c in cands]
                mv['visitNum'] = [rng.choice([0, 1, 1, 2, 3, 7, 40, 300, 1000]) if i else rng.randint(100, 2000)
                                  for i in range(len(cands))]
                hcpe3 += mv.tobytes()
            board.push(m)
    hcpe = np.concatenate(hcpe)
    psv = np.concatenate(psv)
    hcpe.tofile(f'{out}/games.hcpe')
    psv.tofile(f'{out}/games.psv')
    open(f'{out}/games.hcpe3', 'wb').write(bytes(hcpe3))

    # broken copies: a king square past 80, an illegal move, a result of 3, a cut tail
    bad = hcpe.copy()
    bad['hcp'][3][0] |= 0xfe; bad['hcp'][3][1] |= 0x7f  # Black's king on square 127
    bad['bestMove16'][5] = cshogi.move16(hcpe['bestMove16'][5]) ^ 0x7f  # another destination
    bad['gameResult'][8] = 3
    open(f'{out}/bad.hcpe', 'wb').write(bad.tobytes() + b'\x01' * 11)
    badp = psv.copy()
    badp['sfen'][2][:] = 0xff
    badp['game_result'][4] = 5
    badp.tofile(f'{out}/bad.psv')
    raw = bytearray(hcpe3)
    open(f'{out}/bad.hcpe3', 'wb').write(bytes(raw[:len(raw) - 3]))  # the last game cut

    # what cshogi reads back
    lines = []
    b = cshogi.Board()
    for i, r in enumerate(np.fromfile(f'{out}/games.hcpe', cshogi.HuffmanCodedPosAndEval)):
        b.set_hcp(r['hcp'])
        m = b.move_from_move16(int(r['bestMove16']))
        lines.append(f"hcpe {i + 1} {b.sfen()} | {cshogi.move_to_usi(m)} {int(r['gameResult'])} {int(r['eval'])}")
    for i, r in enumerate(np.fromfile(f'{out}/games.psv', cshogi.PackedSfenValue)):
        b.set_psfen(r['sfen'])
        m = b.move_from_psv(int(r['move']))
        lines.append(f"psv {i + 1} {b.sfen()} | {cshogi.move_to_usi(m)} {int(r['gamePly'])} {int(r['game_result'])} {int(r['score'])}")
    data = open(f'{out}/games.hcpe3', 'rb').read()
    off, rec = 0, 0
    while off < len(data):
        rec += 1
        h = np.frombuffer(data, HCPE3_HEAD, 1, off)[0]
        off += 36
        b.set_hcp(h['hcp'])
        lines.append(f"hcpe3 {rec} {b.sfen()} | {int(h['moveNum'])} {int(h['result'])}")
        for j in range(int(h['moveNum'])):
            mi = np.frombuffer(data, MOVE_INFO, 1, off)[0]
            off += 6
            n = int(mi['candidateNum'])
            cv = np.frombuffer(data, MOVE_VISITS, n, off) if n else []
            off += 4 * n
            vis = ' '.join(f"{cshogi.move_to_usi(b.move_from_move16(int(c['move16'])))}:{int(c['visitNum'])}" for c in cv)
            m = b.move_from_move16(int(mi['selectedMove16']))
            lines.append(f"  {j + 1} {cshogi.move_to_usi(m)} {int(mi['eval'])} {n} {vis}".rstrip())
            b.push(m)
    lines += ['bad bad.hcpe 4', 'bad bad.hcpe 6', 'bad bad.hcpe 9', f'bad bad.hcpe {len(hcpe) + 1}',
              'bad bad.psv 3', 'bad bad.psv 5', f'bad bad.hcpe3 {len(games)}']
    open(f'{out}/expected.txt', 'w').write('\n'.join(lines) + '\n')
    print(f'{len(games)} games, {len(hcpe)} positions, {len(hcpe3)} hcpe3 bytes; cshogi {cshogi.__version__ if hasattr(cshogi, "__version__") else "?"}')


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else '.')
