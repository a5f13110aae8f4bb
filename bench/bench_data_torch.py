#!/usr/bin/env python3
"""bench_data_torch.py - the Python route of issue 44's data benchmark: a PyTorch
training loop fed by cshogi's hcpe reader and dlshogi feature maker, as dlshogi's
train.py reads hcpe, on the same files, net and batch as Koma's `train --from-games`
(bench/bench_data.sh runs both; docs/BENCHMARKS.md "Data at the field's scale").

  PYTHONPATH=/work/cshogi-build /usr/bin/python3 bench/bench_data_torch.py \
      --net 4x32 --batch 256 --steps 40 --threads 1 FILES...

Reading: every file with numpy.fromfile(path, cshogi.HuffmanCodedPosAndEval),
concatenated (dlshogi's train.py loads its training files so), then a shuffled
order (numpy permutation: each position once per epoch).
A batch: per record Board.set_hcp, cshogi.dlshogi.make_input_features (62 + 57
feature planes), the move with move_from_move16 and its label with
make_move_label; the result from the record (W/D/L from the side to move). A prefetch thread builds
the next batch while the step runs (as dlshogi's DataLoader does; the GIL
lets the two overlap only where torch releases it). --legal also builds
the legal-move mask (Board.legal_moves, one label each) and trains the
legal head on it, as Koma does; without it the legal head gets no loss
(less work than Koma's step: the comparison favours this route).
The net: Koma's (bench/torch_bench.py: stem conv3x3, residual tower, policy,
legal and W/D/L value heads), its stem on dlshogi's 119 input planes; SGD
Nesterov 0.9, weight decay 1e-4, grad-norm clip 10 (torch_bench's step);
loss: policy cross-entropy on the move, W/D/L cross-entropy on the result.
Prints time to the first step (from the process's start, imports included), samples/s over --steps after --warmup, the
share of step time spent waiting for the loader, and peak RSS.
"""
import argparse
import os
import queue
import resource
import sys
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F

import cshogi
from cshogi import dlshogi as dl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_bench import Koma  # noqa: E402


def process_age_s():
    """Seconds since this process started (its imports included), from /proc."""
    try:
        start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        return float(open("/proc/uptime").read().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return float("nan")


def rss_peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class Loader:
    """Batches from the hcpe records in `order`, built on a prefetch thread."""

    def __init__(self, recs, order, batch, legal):
        self.recs, self.order, self.batch, self.legal = recs, order, batch, legal
        self.q = queue.Queue(maxsize=2)
        self.busy = 0.0
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def make(self, idx):
        B = len(idx)
        f1 = np.zeros((B, dl.FEATURES1_NUM, 9, 9), np.float32)
        f2 = np.zeros((B, dl.FEATURES2_NUM, 9, 9), np.float32)
        label = np.empty(B, np.int64)
        wdl = np.empty(B, np.int64)
        mask = np.zeros((B, 27 * 81), np.float32) if self.legal else None
        board = cshogi.Board()
        for i, r in enumerate(self.recs[idx]):
            board.set_hcp(r['hcp'])
            dl.make_input_features(board, f1[i], f2[i])
            turn = board.turn
            m = board.move_from_move16(int(r['bestMove16']))
            label[i] = dl.make_move_label(m, turn)
            res = int(r['gameResult']) & 3  # 0 draw, 1 black won, 2 white won
            wdl[i] = 1 if res == 0 else (0 if (res == 1) == (turn == cshogi.BLACK) else 2)
            if self.legal:
                for lm in board.legal_moves:
                    mask[i, dl.make_move_label(lm, turn)] = 1.0
        x = torch.from_numpy(np.concatenate([f1, f2], 1))
        return x, torch.from_numpy(label), torch.from_numpy(wdl), (torch.from_numpy(mask) if self.legal else None)

    def run(self):
        for s in range(0, len(self.order) - self.batch + 1, self.batch):
            t = time.perf_counter()
            b = self.make(self.order[s:s + self.batch])
            self.busy += time.perf_counter() - t
            self.q.put(b)
        self.q.put(None)

    def get(self):
        return self.q.get()


def main():
    t_start = time.perf_counter()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", default="4x32")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=40, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps after the first")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--legal", action="store_true", help="build the legal mask and train the legal head")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    recs = np.concatenate([np.fromfile(p, cshogi.HuffmanCodedPosAndEval) for p in a.files])
    t_read = time.perf_counter() - t_start
    order = np.random.default_rng(a.seed).permutation(len(recs))
    blocks, ch = map(int, a.net.lower().split("x"))
    cin = dl.FEATURES1_NUM + dl.FEATURES2_NUM
    model = Koma(blocks, ch, cin).to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, nesterov=True, weight_decay=1e-4)
    loader = Loader(recs, order, a.batch, a.legal)
    waited = [0.0]

    def step():
        t = time.perf_counter()
        b = loader.get()
        waited[0] += time.perf_counter() - t
        if b is None:
            sys.exit("bench_data_torch.py: out of positions (%d): fewer steps or more files" % len(recs))
        x, label, wdl, mask = b
        p, v, lg = model(x.contiguous(memory_format=torch.channels_last))
        loss = F.cross_entropy(p, label) + F.cross_entropy(v, wdl)
        if mask is not None:
            loss = loss + F.binary_cross_entropy_with_logits(lg, mask)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        return float(loss)

    step()
    t_first, age_first = time.perf_counter() - t_start, process_age_s()
    for _ in range(a.warmup):
        step()
    waited[0], busy0 = 0.0, loader.busy
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.steps):
        loss = step()
    el, cpu = time.perf_counter() - t0, time.process_time() - c0
    sps = a.steps * a.batch / el
    print("python route: %s batch %d threads %d%s: %d positions read in %.1f s, first step at %.1f s (%.1f s after main began), "
          "%.1f samples/s, %.1f samples per CPU-second (%d steps, %.1f s, CPU %.1f s), waited for the loader %.1f%% of the time, "
          "loader busy %.1f s, loss %.3f, peak RSS %.0f MB"
          % (a.net, a.batch, a.threads, " +legal" if a.legal else "", len(recs), t_read, age_first, t_first, sps, a.steps * a.batch / cpu, a.steps,
             el, cpu, 100.0 * waited[0] / el, loader.busy - busy0, loss, rss_peak_mb()))
    os._exit(0)  # the prefetch thread may be blocked on a full queue


if __name__ == "__main__":
    main()
