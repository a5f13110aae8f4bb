#!/usr/bin/env python3
"""torch_bench.py - Koma's network in PyTorch, timed like bench/bench_nn_gpu.c.

The side-by-side reference for the CUDA backend (nn/backend_cuda.cu): the same
architecture (nn/net.h: stem conv3x3-BN-act, residual blocks, policy / legal /
value heads), the same batch sizes, the same FLOP count (2 x multiply-adds of
convs and dense layers) and the same peak table.

  inference: eval mode with every BN folded into its conv (as Koma does),
             torch.inference_mode; "host" includes copying the float input in
             (pinned) and policy + value out, "device" has the input resident.
             Note: PyTorch ships float planes (82*81*4 bytes per position);
             Koma ships packed bits (~700 bytes) and expands them on the GPU.
  training:  SGD (Nesterov 0.9, weight decay 1e-4, grad-norm clip 10), policy
             soft cross-entropy + W/D/L cross-entropy + legal BCE, random data.

Modes: tf32 (FP32 with TF32 matmul/conv), bf16 (torch.autocast bf16, FP32
master weights), fp32 (TF32 off). --channels-last (default on) uses NHWC
memory format, the fast path for tensor cores; --compile adds torch.compile.

CPU mode (--device cpu, the side-by-side reference for bench/bench_nn.c):
fp32 only, torch.set_num_threads(--threads), oneDNN (mkldnn) convolutions,
inference = BN folded + eval + inference_mode with the float input resident
and policy + value copied out, training as above (SGD Nesterov).

Usage: python3 bench/torch_bench.py [--nets 6x64,10x128] [--modes tf32,bf16]
         [--batches 1,2,4,...,1024] [--train-batches 256,1024] [--seconds 1]
         [--planes 68] [--hand 14] [--compile] [--no-channels-last]
         [--device 0 | --device cpu --threads 2]
Exits 77 when torch or (without --device cpu) a CUDA device is missing.
"""
import argparse
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print("torch_bench.py: skipped: %s" % e)
    sys.exit(77)

POLICY_CH, HW, VALUE_CH, VALUE_HIDDEN, VALUE_NB = 27, 81, 8, 128, 3

# dense TFLOP/s (bf16, tf32), most specific name first: the same table as bench_nn_gpu.c
PEAKS = [("GH200", 989.4, 494.7), ("H200", 989.4, 494.7), ("H100 NVL", 835.0, 417.5),
         ("H100 PCIe", 756.5, 378.0), ("H100", 989.4, 494.7), ("H800", 989.4, 494.7),
         ("B200", 2250.0, 1100.0), ("A100", 312.0, 156.0), ("A800", 312.0, 156.0),
         ("L40S", 362.1, 183.0), ("L40", 181.0, 90.5), ("A40", 149.7, 74.8), ("A10", 125.0, 62.5),
         ("L4", 121.0, 60.0), ("RTX 4090", 165.2, 82.6), ("RTX 3090", 71.0, 35.6)]


def peak_for(name):
    for match, bf16, tf32 in PEAKS:
        if match in name:
            return match, bf16, tf32
    return "unknown GPU (no peak)", 0.0, 0.0


class Koma(nn.Module):
    """nn/net.h's architecture (the same module layout as tests/nn/torch_ref.py)."""

    def __init__(self, blocks, ch, cin, act="relu"):
        super().__init__()
        bn = lambda c: nn.BatchNorm2d(c, eps=1e-5, momentum=0.01)
        self.act = F.relu if act == "relu" else F.silu
        self.stem = nn.Module()
        self.stem.conv, self.stem.bn = nn.Conv2d(cin, ch, 3, padding=1, bias=False), bn(ch)
        self.blocks = nn.ModuleList()
        for _ in range(blocks):
            b = nn.Module()
            b.conv1, b.bn1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False), bn(ch)
            b.conv2, b.bn2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False), bn(ch)
            self.blocks.append(b)
        for head in ("policy", "legal"):
            h = nn.Module()
            h.conv, h.bn = nn.Conv2d(ch, ch, 3, padding=1, bias=False), bn(ch)
            h.out = nn.Conv2d(ch, POLICY_CH, 1)
            setattr(self, head, h)
        self.value = nn.Module()
        self.value.conv, self.value.bn = nn.Conv2d(ch, VALUE_CH, 1, bias=False), bn(VALUE_CH)
        self.value.fc1 = nn.Linear(VALUE_CH * HW, VALUE_HIDDEN)
        self.value.fc2 = nn.Linear(VALUE_HIDDEN, VALUE_NB)

    def forward(self, x):
        a = self.act
        h = a(self.stem.bn(self.stem.conv(x)))
        for b in self.blocks:
            t = a(b.bn1(b.conv1(h)))
            h = a(b.bn2(b.conv2(t)) + h)
        p = self.policy.out(a(self.policy.bn(self.policy.conv(h)))).flatten(1)
        l = self.legal.out(a(self.legal.bn(self.legal.conv(h)))).flatten(1)
        v = a(self.value.bn(self.value.conv(h))).flatten(1)
        v = self.value.fc2(a(self.value.fc1(v)))
        return p, v, l


def fold_bn(model):
    """Eval copy with every (conv, bn) pair fused into one conv with bias."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    model.eval()
    pairs = [(model.stem, "conv", "bn")]
    pairs += [(b, "conv1", "bn1") for b in model.blocks] + [(b, "conv2", "bn2") for b in model.blocks]
    pairs += [(model.policy, "conv", "bn"), (model.legal, "conv", "bn"), (model.value, "conv", "bn")]
    for mod, c, b in pairs:
        setattr(mod, c, fuse_conv_bn_eval(getattr(mod, c), getattr(mod, b)))
        setattr(mod, b, nn.Identity())
    return model


def conv_flop(cin, cout, k):
    return 2.0 * HW * cin * cout * k * k


def net_flop(blocks, ch, cin):
    f = conv_flop(cin, ch, 3) + 2 * blocks * conv_flop(ch, ch, 3)
    f += 2 * (conv_flop(ch, ch, 3) + conv_flop(ch, POLICY_CH, 1))
    f += conv_flop(ch, VALUE_CH, 1) + 2.0 * (VALUE_CH * HW * VALUE_HIDDEN + VALUE_HIDDEN * VALUE_NB)
    return f


def sync():
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


CLOCK = time.perf_counter  # --cpu-time: time.process_time (all threads' CPU seconds)


def timed(fn, seconds, min_iters=3):
    fn()
    sync()
    it, t0 = 0, CLOCK()
    chunk = 1
    while True:
        for _ in range(chunk):
            fn()
        sync()
        it += chunk
        t = CLOCK() - t0
        if t >= seconds and it >= min_iters:
            return it, t
        chunk = min(chunk * 2, 64)


def random_input(B, planes, hand, dev):
    bits = (torch.rand(B, planes, 9, 9, device=dev) < 0.125).float()
    h = torch.randint(0, 4, (B, hand, 1, 1), device=dev).float().expand(B, hand, 9, 9)
    return torch.cat([bits, h], 1).contiguous()


def bench(args, size, mode, dev, peak):
    blocks, ch = map(int, size.lower().split("x"))
    cin = args.planes + args.hand
    fpp = net_flop(blocks, ch, cin)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    cpu = dev.type == "cpu"
    torch.backends.cuda.matmul.allow_tf32 = mode != "fp32"
    torch.backends.cudnn.allow_tf32 = mode != "fp32"
    torch.backends.cudnn.benchmark = True
    amp = torch.autocast("cpu" if cpu else "cuda", dtype=torch.bfloat16, enabled=(mode == "bf16"))
    print("\n## %s %s (torch %s, %s%s; %.1f MFLOP per position forward)\n"
          % (size, mode, torch.__version__, "channels_last" if args.channels_last else "NCHW",
             ", torch.compile" if args.compile else "", fpp * 1e-6))

    # ---- inference (folded BN) ----
    model = fold_bn(Koma(blocks, ch, cin).to(dev)).to(memory_format=fmt)
    infer = torch.compile(model, dynamic=False) if args.compile else model
    print("| batch | evals/s (host in/out) | ms/batch | evals/s (device only) | ms/batch | TFLOP/s | % of peak |")
    print("|------:|------:|------:|------:|------:|------:|------:|")
    for B in args.batches:
        x = random_input(B, args.planes, args.hand, dev).to(memory_format=fmt)
        xh = x.cpu() if cpu else x.cpu().pin_memory()
        ph = torch.empty(B, POLICY_CH * HW, pin_memory=not cpu)
        vh = torch.empty(B, VALUE_NB, pin_memory=not cpu)

        def host():
            with torch.inference_mode(), amp:
                p, v, _ = infer(xh.to(dev, non_blocking=True).contiguous(memory_format=fmt))
                ph.copy_(p.float(), non_blocking=True)
                vh.copy_(v.float(), non_blocking=True)
            sync()  # the host needs the result, as a search thread would

        def device():
            with torch.inference_mode(), amp:
                infer(x)

        for _ in range(3):
            host()
        it, t = timed(host, args.seconds)
        host_eps, host_ms = B * it / t, 1e3 * t / it
        it, t = timed(device, args.seconds)
        dev_eps = B * it / t
        tflops = dev_eps * fpp * 1e-12
        print("| %5d | %9.0f | %7.3f | %9.0f | %7.3f | %6.2f | %5.2f%% |"
              % (B, host_eps, host_ms, dev_eps, 1e3 * t / it, tflops, 100.0 * tflops / peak if peak else 0.0))
        sys.stdout.flush()
    del model, infer

    # ---- training ----
    print()
    model = Koma(blocks, ch, cin).to(dev).to(memory_format=fmt).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, nesterov=True, weight_decay=1e-4)
    step_fn = model
    if args.compile:
        step_fn = torch.compile(model)
    for B in args.train_batches:
        x = random_input(B, args.planes, args.hand, dev).to(memory_format=fmt)
        labels = torch.randint(0, POLICY_CH * HW, (B, 8), device=dev)
        pt = torch.zeros(B, POLICY_CH * HW, device=dev).scatter_(1, labels, 0.125)
        legal = (pt > 0).float()
        vt = F.one_hot(torch.randint(0, 3, (B,), device=dev), 3).float()
        last = {}

        def step():
            with amp:
                p, v, l = step_fn(x)
                loss = (-(pt * F.log_softmax(p.float(), 1)).sum(1).mean()
                        - (vt * F.log_softmax(v.float(), 1)).sum(1).mean()
                        + F.binary_cross_entropy_with_logits(l.float(), legal))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            opt.step()
            last["loss"] = loss

        for _ in range(3):
            step()
        it, t = timed(step, args.seconds)
        sps = B * it / t
        tflops = sps * 3.0 * fpp * 1e-12
        print("| train | %5d | %9.0f samples/s | %7.2f ms/step | %6.2f TFLOP/s | %5.2f%% of peak | loss %.3f |"
              % (B, sps, 1e3 * t / it, tflops, 100.0 * tflops / peak if peak else 0.0, float(last["loss"])))
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ints = lambda s: [int(v) for v in s.split(",") if v]
    ap.add_argument("--nets", default="6x64,10x128")
    ap.add_argument("--modes", default="tf32,bf16")
    ap.add_argument("--batches", type=ints, default=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    ap.add_argument("--train-batches", type=ints, default=[256, 1024])
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--planes", type=int, default=68)
    ap.add_argument("--hand", type=int, default=14)
    ap.add_argument("--device", default="0", help="CUDA device index, or cpu")
    ap.add_argument("--threads", type=int, default=0, help="--device cpu: torch.set_num_threads (0: torch's default)")
    ap.add_argument("--cpu-time", action="store_true", help="time with process CPU seconds (as bench_nn --cpu-time)")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    args = ap.parse_args()
    if args.device == "cpu":
        return main_cpu(args)
    if not torch.cuda.is_available():
        print("torch_bench.py: skipped: torch.cuda.is_available() is False")
        return 77
    dev = torch.device("cuda", int(args.device))
    props = torch.cuda.get_device_properties(dev)
    src, pk_bf16, pk_tf32 = peak_for(props.name)
    print("# torch_bench: device %d %s, cc %d.%d, %d SMs, %.1f GiB; torch %s, CUDA %s, cuDNN %s"
          % (int(args.device), props.name, props.major, props.minor, props.multi_processor_count,
             props.total_memory / 2**30, torch.__version__, torch.version.cuda, torch.backends.cudnn.version()))
    print("# dense peak (%s): bf16 %.1f TFLOP/s, tf32 %.1f TFLOP/s; input %d planes + %d hand"
          % (src, pk_bf16, pk_tf32, args.planes, args.hand))
    for mode in args.modes.split(","):
        if mode not in ("tf32", "bf16", "fp32"):
            print("unknown mode %r (tf32, bf16, fp32)" % mode)
            return 2
        peak = {"bf16": pk_bf16, "tf32": pk_tf32, "fp32": 0.0}[mode]
        for size in args.nets.split(","):
            bench(args, size, mode, dev, peak)
    return 0


def main_cpu(args):
    global CLOCK
    if args.cpu_time:
        CLOCK = time.process_time
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    modes = args.modes if args.modes != "tf32,bf16" else "fp32"
    cpu_model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    print("# torch_bench: CPU %s, %d threads; torch %s, oneDNN (mkldnn) %s; input %d planes + %d hand"
          % (cpu_model, torch.get_num_threads(), torch.__version__, torch.backends.mkldnn.is_available(),
             args.planes, args.hand))
    for mode in modes.split(","):
        if mode not in ("fp32", "bf16"):
            print("unknown CPU mode %r (fp32, bf16)" % mode)
            return 2
        for size in args.nets.split(","):
            bench(args, size, mode, torch.device("cpu"), 0.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
