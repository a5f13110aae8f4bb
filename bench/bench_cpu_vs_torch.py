#!/usr/bin/env python3
"""bench_cpu_vs_torch.py - Koma's CPU backend and PyTorch on the same network,
interleaved in one run, reported as ratios (docs/BENCHMARKS.md).

Each round runs, one after the other: build/bench/bench_nn on the oneDNN route
(KOMA_CPU_CONV=dnnl), bench/torch_bench.py --device cpu, and bench_nn on the
reference route (KOMA_CPU_CONV=ref); a shared machine's load moves all three
alike within a round, so the per-round ratios are what is compared. Prints
each round, then the median of the per-round ratios.

Usage: python3 bench/bench_cpu_vs_torch.py [--rounds 3] [--nets 6x64,10x128]
         [--batch 256] [--threads 2] [--seconds 1] [--cpu-time]
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
    for r in range(args.rounds):
        for net in args.nets.split(","):
            kd, pt, kr = koma(args, "dnnl", net), torch(args, net), koma(args, "ref", net)
            print("round %d %-7s load %5s | infer evals/s dnnl %6.0f torch %6.0f ref %6.0f | "
                  "train samples/s dnnl %5.0f torch %5.0f ref %5.0f | dnnl/torch %.2f %.2f | dnnl/ref %.2f %.2f"
                  % (r + 1, net, loadavg(), kd[0], pt[0], kr[0], kd[1], pt[1], kr[1], kd[0] / pt[0], kd[1] / pt[1],
                     kd[0] / kr[0], kd[1] / kr[1]))
            sys.stdout.flush()
            for key, v in (("infer dnnl/torch", kd[0] / pt[0]), ("train dnnl/torch", kd[1] / pt[1]),
                           ("infer ref/torch", kr[0] / pt[0]), ("train ref/torch", kr[1] / pt[1]),
                           ("infer dnnl/ref", kd[0] / kr[0]), ("train dnnl/ref", kd[1] / kr[1])):
                ratios.setdefault((net, key), []).append(v)
    print("\n| net | ratio | median | min | max |\n|---|---|---:|---:|---:|")
    for (net, key), v in ratios.items():
        print("| %s | %s | %.2f | %.2f | %.2f |" % (net, key, statistics.median(v), min(v), max(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
