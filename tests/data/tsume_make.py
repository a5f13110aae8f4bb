#!/usr/bin/env python3
"""tsume_make.py - makes tests/data/tsume.txt: tsume positions with their
shortest mate length (plies) or `nomate`, measured by koma's `go mate` (the
iterative-deepening search of usi/mate.c: exhaustive over checks, shortest
mate first), never by the df-pn solver the file tests.

Sources of the positions (SFENs only; lengths are measured here, under the
full game rules, so a futile interposition counts as a move and a problem's
published length may differ):
  - antma/tsumeshogi-check (github), tests/tsume1.rs .. tsume9.rs: problems
    as published with no attacking king; a Black king is added on the first
    empty square of 9i, 1i, 9h, 1h (the defender can then also give check,
    which the measured length takes into account);
  - Koma's own tests: tests/usi/test_usi_mate.c (mates in 3, 5, 7, a pawn-drop
    mate that is illegal, checks that run out) and tests/data/mate1_problems.txt.

Usage: python3 tests/data/tsume_make.py BUILD/koma > tests/data/tsume.txt
Lines whose `go mate` runs out of time (60 s) are left out and named on stderr.
"""
import subprocess
import sys

ANTMA = [
    # tsume1.rs
    "k8/9/PK7/9/9/9/9/9/9 b 2r2b4g4s4n4l17p 1",
    "3k5/9/3S5/9/9/9/9/9/9 b S2r2b4g2s4n4l18p 1",
    "k8/9/1K7/9/9/9/8B/8B/9 b 2r4g4s4n4l18p 1",
    "kb7/p8/9/9/9/9/8B/9/8K b 2R4G4S4N4L17P 1",
    "7pk/9/7K1/5+r3/9/9/9/1B7/R8 b b4g4s4n4l18p 1",
    "4k4/9/4P4/9/9/9/9/9/9 b G2r2b3g4s4n4l17p 1",
    "4k4/9/4S4/9/9/9/9/9/9 b S2r2b4g2s4n4l18p 1",
    "kn7/ps7/9/9/N8/9/9/9/8B b 2r2b4g2s4n4l18p 1",
    "9/2B6/3G2r2/3pkL1R1/3gsg3/3S2B2/3g5/4N4/4L4 b 2s3n2l17p 1",
    # tsume3.rs
    "k2G5/9/K8/9/N8/9/9/9/9 b 2r2b3g4s3n4l18p 1",
    "3sks3/9/4S4/9/9/8B/9/9/9 b S 1",
    "9/4k4/9/4P4/9/9/9/9/9 b 2G2r2b4s4n4l17p 1",
    "9/6k2/9/5G3/4G4/4P4/9/9/9 b 2G2r2b4s4n4l17p 1",
    "9/4k4/9/5G3/4G4/4P4/9/9/9 b 2G2r2b4s4n4l17p 1",
    "9/5k3/9/5G3/4G4/4P4/9/9/9 b 2G2r2b4s4n4l17p 1",
    "7nl/7k1/6Ppp/9/9/9/9/9/9 b 2G2r2b2g4s3n3l15p 1",
    "7nl/7k1/5+Pppp/9/9/9/9/9/9 b GS2r2b2g3s3n3l14p 1",
    "5g1nl/4g1sk1/4ppppp/9/4B4/9/9/9/9 b GN2rbg3s2n3l13p 1",
    "5k3/7gR/4S4/7L1/9/9/9/9/9 b Sr2b3g2s4n3l18p 1",
    "8l/6nkg/5PpBp/5+r3/7R1/9/9/9/9 b b3g4s3n3l15p 1",
    "9/9/9/9/9/7np/8k/8B/7LR b rb4g4s3n3l17p 1",
    "ln1gkg1nl/6+P2/2sppps1p/2p3p2/p8/P1P1P3P/2NP1PP2/3s1KSR1/L1+b2G1NL w R2Pbgp 42",
    "4kp+R2/1+B4n2/4p1Sp1/2pps1l1g/1p3PR2/2P6/1GNPP+pN2/3S5/1+lBKG4 b GNL4Psl3p 105",
    "6+R2/1+B1k2n2/4p1Sp1/2pps1l1g/1p3PR2/2P6/1GNPP+pN2/3S5/1+lBKG4 b GNL4Psl4p 105",
    "6+R2/1+B2k1n2/4p1Sp1/2pps1l1g/1p3PR2/2P6/1GNPP+pN2/3S5/1+lBKG4 b GNL4Psl4p 105",
    "4kl+R2/1+B4n2/4p1Sp1/2pps1l1g/1p3PR2/2P6/1GNPP+pN2/3S5/1+lBKG4 b GNL4Ps4p 105",
    "9/4k4/9/4P4/9/9/9/9/9 b G2r2b4s4n4l17p 1",
    "k8/9/9/1+R7/9/9/9/9/P8 b LPr2b4g4s4n3l16p 1",
    "2R4nl/6g2/S2+B2s1+P/2gppppp1/1kpsnP3/LN1PS4/1PG1P1N2/3K3R1/1+p3+b2L b LPg5p 125",
    "+N7l/9/2GSppS2/p5p+Rp/7l1/1PP1k4/P1SP2NP1/2GK2S2/LN1B1G3 b RN3Pbgl5p 1",
    # tsume5.rs
    "9/9/5k3/9/4G4/4P4/9/9/9 b 3G2r2b4s4n4l17p 1",
    "6knl/6s2/5Pppp/9/9/9/9/9/9 b G2S2r2b3gs3n3l14p 1",
    "7nl/7k1/6ppp/9/9/9/9/9/5R3 b Sr2b4g3s3n3l15p 1",
    "7nl/5+R1gk/6Ppp/9/9/9/9/9/9 b Gr2b2g4s3n3l15p 1",
    "4R2nl/6sk1/6pp1/8p/9/9/9/9/9 b BGLrb3g3s3n2l15p 1",
    "l6nl/3+R1pk2/3p3gp/p1p3p2/1p1nsN3/2P3P1P/PP1P1S3/1SG2GK2/LN6L b BGPrbs4p 1",
    "3sr4/4p4/2Sks1n2/3p1P3/2L3N2/4P1P2/4N4/9/9 b BNb3gs3l13p 1",
    "l2k5/9/3S2S2/9/9/9/9/9/9 b B2N2rb4g2s2n3l18p 1",
    "9/9/3S5/3p1p3/4kb3/3P2s2/4P4/4N4/9 b RNrb3g2s2n4l14p 1",
    "7nl/7k1/9/9/7BL/5+r1R1/9/9/9 b 2Gb2g4s3n2l18p 1",
    "7r1/7k1/4r4/5N+Bp1/8p/9/9/9/9 b G2Nb3g4sn4l16p 1",
    "4k4/1+B4n+R1/4p1Sp1/2pps1l1g/1p3PR2/2P6/1GNPP+pN2/3S5/1+lBKG4 b GNL4Psl4p 1",
    # tsume7.rs
    "9/9/9/4k4/9/4P4/9/9/9 b 4G2r2b4s4n4l17p 1",
    "+R4G1nl/6k2/4ppppp/9/9/9/9/9/9 b r2b3g4s3n3l13p 1",
    # tsume9.rs
    "ln7/1k1+P5/1pp1S4/p8/9/2P6/9/9/9 b BGN2rbg2s2n3l13p 1",
    "ln1p5/2k1p4/1pgP+P4/p8/1P7/P8/9/9/9 b RG2Sr2b2g2s3n3l10p 1",
    "ln7/1k2s4/1pp6/p8/9/3L5/9/9/9 b RBGNrb3g3s2n2l15p 1",
]

KOMA = [
    # tests/usi/test_usi_mate.c
    "lb7/4k4/5P3/5G3/9/9/9/9/8K b GG 1",
    "8k/9/2R6/9/9/9/9/9/K8 b NG 1",
    "5R1gk/2rg5/7P1/7S1/9/9/9/9/6K2 b BB 1",
    "1R7/k8/2b3g2/1S7/9/9/9/9/4K4 b NS 1",
    "k8/7l1/p7R/S2L5/9/9/9/9/K8 b S 1",
    "9/2k6/3R5/3B5/9/9/9/9/3K5 b B 1",
    "3k5/9/g8/3N5/9/9/9/9/2K6 b RS 1",
    "7k1/p7n/8l/7P1/9/9/9/9/4K4 b RB 1",
    "k8/9/9/9/9/9/6r2/9/8K w gn 1",
    "7gk/7sl/9/9/9/9/9/9/K8 b N 1",
    "7nk/9/7G1/9/9/9/9/9/K8 b P 1",
    "startpos",
    # tests/data/mate1_problems.txt
    "4k4/9/4P4/9/9/9/9/9/4K4 b G 1",
    "8k/7pp/9/9/9/9/9/9/K8 b Rg 1",
    "7nk/7p1/8G/9/9/9/9/9/K8 b P 1",
    "3lkl3/3p1p3/9/9/4N4/9/9/9/4R3K b g 1",
    "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",
    "4k4/9/4P4/9/9/9/9/9/4K4 b S 1",
]


def add_king(sfen):
    board, rest = sfen.split(" ", 1)
    if "K" in board.replace("+", ""):
        return sfen
    rows = []
    for row in board.split("/"):
        cells = []
        i = 0
        while i < len(row):
            c = row[i]
            if c.isdigit():
                cells += ["."] * int(c)
            elif c == "+":
                cells.append(row[i:i + 2])
                i += 1
            else:
                cells.append(c)
            i += 1
        rows.append(cells)
    for r, f in ((8, 0), (8, 8), (7, 0), (7, 8)):  # 9i, 1i, 9h, 1h
        if rows[r][f] == ".":
            rows[r][f] = "K"
            break
    out = []
    for cells in rows:
        s, run = "", 0
        for c in cells:
            if c == ".":
                run += 1
                continue
            if run:
                s += str(run)
                run = 0
            s += c
        if run:
            s += str(run)
        out.append(s)
    return "/".join(out) + " " + rest


def main():
    koma = sys.argv[1] if len(sys.argv) > 1 else "build/koma"
    p = subprocess.Popen([koma], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    p.stdin.write("usi\n")
    print("# tsume.txt - tsume positions for test_dfpn, test_usi_tsume and the df-pn benchmark.")
    print("# Format: SFEN ; the shortest mate in plies, or nomate (koma's go mate proved there is none).")
    print("# Made by tests/data/tsume_make.py with koma's `go mate` (iterative deepening, exhaustive")
    print("# over checks), not by the df-pn solver; test_usi_tsume measures every length again.")
    print("# Sources: github antma/tsumeshogi-check tests/tsume{1,3,5,7,9}.rs (a Black king added")
    print("# on 9i/1i/9h/1h where the problem has none), Koma's tests/usi/test_usi_mate.c and")
    print("# tests/data/mate1_problems.txt. Lengths are under the game rules (futile drops count).")
    for group, sfens in (("antma/tsumeshogi-check", ANTMA), ("koma tests", KOMA)):
        for sfen in sfens:
            s = add_king(sfen) if group != "koma tests" else sfen
            pos = "position startpos" if s == "startpos" else "position sfen " + s
            p.stdin.write(pos + "\ngo mate 60000\n")
            p.stdin.flush()
            bad = False
            while True:
                line = p.stdout.readline()
                if not line:
                    sys.exit("koma ended")
                bad = bad or "bad SFEN" in line
                if line.startswith("checkmate"):
                    break
            if bad:
                print("left out (not a legal position): " + s, file=sys.stderr)
                continue
            words = line.split()
            if words[1] == "timeout":
                print("left out (timeout): " + s, file=sys.stderr)
                continue
            n = "nomate" if words[1] == "nomate" else str(len(words) - 1)
            print("%s ; %s" % (s, n))
    p.stdin.write("quit\n")
    p.stdin.close()
    p.wait()


if __name__ == "__main__":
    main()
