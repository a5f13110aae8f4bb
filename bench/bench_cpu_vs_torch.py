#!/usr/bin/env python3
"""bench_cpu_vs_torch.py - Koma's CPU backend and PyTorch on the same network,
interleaved in one run, reported as ratios (docs/BENCHMARKS.md).

Each round runs, one after the other: build/bench/bench_nn on each route of
--routes (KOMA_CPU_CONV=wino: Winograd over oneDNN, the default; dnnl: oneDNN;
ref: im2col + BLAS) and bench/torch_bench.py --device cpu; a shared machine's
load moves them alike within a round, so the per-round ratios are what is
compared. Prints each round, then the median of the per-round ratios.

Usage: python3 bench/bench_cpu_vs_torch.py [--rounds 3] [--nets 6x64,10x128]
         [--routes wino,dnnl] [--batch 256] [--threads 2] [--seconds 1] [--cpu-time]
--cpu-time: process CPU seconds (with --threads 1: per-core figures that other
processes on the machine barely move).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env):
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (out.returncode, " ".join(cmd), out.stdout[-2000:]))
    return out.stdout


def koma(args, route, net):
    env = dict(os.environ, KOMA_CPU_CONV=route)
    cmd = [os.path.join(ROOT, "build/bench/bench_nn"), "--nets", net, "--batches", str(args.batch),
           "--train-batch", str(args.batch), "--planes", "68", "--hand", "14", "--threads", str(args.threads),
           "--seconds", str(args.seconds)] + (["--cpu-time"] if args.cpu_time else [])
    out = run(cmd, env)
    inf = float(re.search(r"inference\s+batch\s+\d+:\s+([\d.]+) evals/s", out).group(1))
    tr = float(re.search(r"training\s+batch\s+\d+:\s+([\d.]+) samples/s", out).group(1))
    return inf, tr


def torch(args, net):
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "bench/torch_bench.py"), "--device", "cpu", "--threads",
           str(args.threads), "--nets", net, "--batches", str(args.batch), "--train-batches", str(args.batch),
           "--seconds", str(args.seconds)] + (["--cpu-time"] if args.cpu_time else [])
    out = run(cmd, dict(os.environ))
    inf = float(re.search(r"^\|\s+%d \|\s+([\d.]+) \|" % args.batch, out, re.M).group(1))
    tr = float(re.search(r"^\| train \|\s+\d+ \|\s+([\d.]+) samples/s", out, re.M).group(1))
    return inf, tr


def loadavg():
    try:
        return open("/proc/loadavg").read().split()[0]
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nets", default="6x64,10x128")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--routes", default="wino,dnnl")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--cpu-time", action="store_true")
    args = ap.parse_args()
    # bench_nn (like selfplay, train, koma) starts itself again with OMP_WAIT_POLICY=passive where it
    # is unset; PyTorch's OpenMP gets the same setting so that both sides run alike
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    clock = "CPU s" if args.cpu_time else "wall s"
    print("# %d rounds, batch %d, %d threads, %s, OMP_WAIT_POLICY=%s; load average at start %s"
          % (args.rounds, args.batch, args.threads, clock, os.environ["OMP_WAIT_POLICY"], loadavg()))
    ratios = {}
    routes = args.routes.split(",")
    for r in range(args.rounds):
        for net in args.nets.split(","):
            got = {}
            for i, route in enumerate(routes):  # torch in the middle of the routes
                got[route] = koma(args, route, net)
                if i == len(routes) // 2 - 1 or len(routes) == 1:
                    got["torch"] = torch(args, net)
            pt = got["torch"]
            line = "round %d %-7s load %5s | infer evals/s " % (r + 1, net, loadavg())
            line += " ".join("%s %.0f" % (k, v[0]) for k, v in got.items())
            line += " | train samples/s " + " ".join("%s %.0f" % (k, v[1]) for k, v in got.items())
            line += " | vs torch " + " ".join("%s %.2f %.2f" % (k, got[k][0] / pt[0], got[k][1] / pt[1]) for k in routes)
            print(line)
            sys.stdout.flush()
            for k in routes:
                ratios.setdefault((net, "infer %s/torch" % k), []).append(got[k][0] / pt[0])
                ratios.setdefault((net, "train %s/torch" % k), []).append(got[k][1] / pt[1])
            for k in routes[1:]:
                ratios.setdefault((net, "infer %s/%s" % (routes[0], k)), []).append(got[routes[0]][0] / got[k][0])
                ratios.setdefault((net, "train %s/%s" % (routes[0], k)), []).append(got[routes[0]][1] / got[k][1])
    print("\n| net | ratio | median | min | max |\n|---|---|---:|---:|---:|")
    for (net, key), v in ratios.items():
        print("| %s | %s | %.2f | %.2f | %.2f |" % (net, key, statistics.median(v), min(v), max(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
