#!/usr/bin/python3
"""torch_ref.py - an independent PyTorch reference for Koma's network (nn/).

Usage: /usr/bin/python3 tests/nn/torch_ref.py DIR TAG [TAG ...]

For each TAG reads DIR/TAG.weights.safetensors (a Koma net) and
DIR/TAG.io.safetensors (inputs, Koma's CPU outputs, losses, gradients and the
weights after one SGD step; written by tests/nn/test_nn_torch.c), rebuilds the
net as a torch module in float64 from the file alone, and compares:
  - inference logits (eval mode, running statistics) with out.*;
  - the three losses in training mode (batch statistics) with out.metrics;
  - every parameter gradient with grad.*;
  - params and running statistics after clip + decoupled decay + Nesterov SGD
    (torch.optim.SGD) with after.*;
  - nets with the optional heads ("BxC[gK]mo"): the moves-left output in
    plies (20 * max(raw, 0)) at inference, its Huber loss (delta 0.5 on
    raw - plies / 20, rows with a target) and the opponent-reply
    cross-entropy, both in the total, and their gradients.
The packed planes are decoded here with numpy, independently of the C code.
Writes DIR/verdict.txt ("pass", "fail" or "skip") and exits 0, 1 or 77.
"""
import json
import os
import struct
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else "."


def verdict(word, code):
    with open(os.path.join(DIR, "verdict.txt"), "w") as f:
        f.write(word + "\n")
    sys.exit(code)


try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # no torch here: the ctest reports a skip
    print("torch_ref.py: %s" % e)
    verdict("skip", 77)

DT = {"F32": np.float32, "F64": np.float64, "U8": np.uint8, "I8": np.int8, "U16": np.uint16,
      "U32": np.uint32, "I32": np.int32, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + e], dtype=DT[t["dtype"]]).reshape(t["shape"])
    return out, meta


class Koma(nn.Module):
    """The architecture documented in nn/net.h, rebuilt from its description."""

    def __init__(self, blocks, ch, cin, act, bn_momentum, gpool=0, heads=""):
        super().__init__()
        bn = lambda c: nn.BatchNorm2d(c, eps=1e-5, momentum=bn_momentum)
        self.act = F.relu if act == "relu" else F.silu
        self.stem = nn.Module()
        self.stem.conv, self.stem.bn = nn.Conv2d(cin, ch, 3, padding=1, bias=False), bn(ch)
        self.blocks = nn.ModuleList()
        for _ in range(blocks):
            b = nn.Module()
            b.conv1, b.bn1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False), bn(ch)
            b.conv2, b.bn2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False), bn(ch)
            if gpool and (len(self.blocks) + 1) % gpool == 0:  # KataGo's global-pooling bias
                b.gpool = nn.Linear(2 * ch, ch)
            self.blocks.append(b)
        for head in ("policy", "legal"):
            h = nn.Module()
            h.conv, h.bn = nn.Conv2d(ch, ch, 3, padding=1, bias=False), bn(ch)
            h.out = nn.Conv2d(ch, 27, 1)
            setattr(self, head, h)
        self.value = nn.Module()
        self.value.conv, self.value.bn = nn.Conv2d(ch, 8, 1, bias=False), bn(8)
        self.value.fc1, self.value.fc2 = nn.Linear(8 * 81, 128), nn.Linear(128, 3)
        self.heads = heads
        if "m" in heads:  # lc0's moves-left head
            self.moves_left = nn.Module()
            self.moves_left.conv, self.moves_left.bn = nn.Conv2d(ch, 8, 1, bias=False), bn(8)
            self.moves_left.fc1, self.moves_left.fc2 = nn.Linear(8 * 81, 32), nn.Linear(32, 1)
        if "o" in heads:  # KataGo's opponent-reply policy, on the policy head's hidden activation
            self.opp_policy = nn.Module()
            self.opp_policy.out = nn.Conv2d(ch, 27, 1)

    def forward(self, x):
        a = self.act
        h = a(self.stem.bn(self.stem.conv(x)))
        for b in self.blocks:
            t = a(b.bn1(b.conv1(h)))
            if hasattr(b, "gpool"):
                pooled = torch.cat([t.mean(dim=(2, 3)), t.amax(dim=(2, 3))], dim=1)
                t = t + b.gpool(pooled)[:, :, None, None]
            h = a(b.bn2(b.conv2(t)) + h)
        ph = a(self.policy.bn(self.policy.conv(h)))
        p = self.policy.out(ph).flatten(1)
        l = self.legal.out(a(self.legal.bn(self.legal.conv(h)))).flatten(1)
        v = a(self.value.bn(self.value.conv(h))).flatten(1)
        v = self.value.fc2(a(self.value.fc1(v)))
        self.ml = self.opp = None
        if "m" in self.heads:
            m = a(self.moves_left.bn(self.moves_left.conv(h))).flatten(1)
            self.ml = self.moves_left.fc2(a(self.moves_left.fc1(m))).flatten()  # raw, units of 20 plies
        if "o" in self.heads:
            self.opp = self.opp_policy.out(ph).flatten(1)
        return p, v, l


def unpack(bits, B, planes):
    """Koma's packed format: bit i = plane*81 + square in byte i>>3 at bit i&7."""
    u = np.unpackbits(bits.reshape(B, -1), axis=1, bitorder="little")[:, :planes * 81]
    return u.reshape(B, planes, 9, 9).astype(np.float64)


failures = 0


def compare(what, ours, ref, atol, rtol):
    """llm.c style: first mismatches and the max difference."""
    global failures
    ours = np.asarray(ours, dtype=np.float64).ravel()
    ref = np.asarray(ref, dtype=np.float64).ravel()
    d = np.abs(ours - ref)
    bad = np.nonzero(~(d <= atol + rtol * np.abs(ref)))[0]
    for i in bad[:5]:
        print("  %s[%d]: koma %.9g, torch %.9g" % (what, i, ours[i], ref[i]))
    print("%-44s n=%-7d max|diff| %.3g %s" % (what, ours.size, d.max() if d.size else 0.0,
                                              "MISMATCH" if len(bad) else "ok"))
    if len(bad):
        failures += 1


def run(tag):
    w, wmeta = load_safetensors(os.path.join(DIR, tag + ".weights.safetensors"))
    io, meta = load_safetensors(os.path.join(DIR, tag + ".io.safetensors"))
    arch = wmeta["koma.net"]  # "BxC", "BxCgK", and the head suffixes "m", "o"
    heads = "".join(c for c in arch if c in "mo")
    blocks, rest = arch.rstrip("mo").split("x")
    ch, gpool = (rest.split("g") + ["0"])[:2]
    blocks, ch, gpool = int(blocks), int(ch), int(gpool)
    planes, hand = int(wmeta["koma.in_planes"]), int(wmeta["koma.in_hand"])
    cfg = {k: float(v) for k, v in meta.items() if not k.startswith("koma.")}
    B = int(cfg["batch"])
    print("== %s: net %s %s, %d planes + %d hand, batch %d" % (tag, wmeta["koma.net"], wmeta["koma.activation"],
                                                              planes, hand, B))
    torch.manual_seed(0)
    model = Koma(blocks, ch, planes + hand, wmeta["koma.activation"], cfg["bn_momentum"], gpool, heads).double()
    sd = {k: torch.from_numpy(v.astype(np.float64)) for k, v in w.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.endswith("num_batches_tracked")]
    if missing or unexpected:
        print("state_dict mismatch: missing %s unexpected %s" % (missing, unexpected))
        return False

    x = np.concatenate([unpack(io["in.planes"], B, planes),
                        np.broadcast_to(io["in.hand"].reshape(B, hand, 1, 1).astype(np.float64), (B, hand, 9, 9))], 1)
    x = torch.from_numpy(np.ascontiguousarray(x))
    legal = torch.from_numpy(unpack(io["in.legal"], B, 27).reshape(B, 2187))

    # inference (eval mode: running statistics)
    model.eval()
    with torch.no_grad():
        p, v, l = model(x)
    compare(tag + " inference policy logits", io["out.policy"], p.numpy(), 2e-4, 2e-3)
    compare(tag + " inference value logits", io["out.value"], v.numpy(), 2e-4, 2e-3)
    compare(tag + " inference legal logits", io["out.legal"], l.numpy(), 2e-4, 2e-3)
    if "m" in heads:
        compare(tag + " inference moves_left plies", io["out.moves_left"], 20.0 * np.maximum(model.ml.numpy(), 0),
                2e-3, 2e-3)

    # targets
    off, lab, prob = io["in.policy_offsets"], io["in.policy_label"], io["in.policy_prob"]
    T = np.zeros((B, 2187))
    for b in range(B):
        for j in range(off[b], off[b + 1]):
            T[b, lab[j]] += prob[j]
    T = torch.from_numpy(T)
    res = io["in.result"].astype(np.int64)
    onehot = np.zeros((B, 3))
    onehot[np.arange(B), np.where(res > 0, 0, np.where(res == 0, 1, 2))] = 1
    q = np.clip(io["in.root_q"].astype(np.float64), -1, 1)
    d = cfg["q_draw"] * (1 - np.abs(q))
    wdl = np.stack([(1 + q - d) / 2, d, (1 - q - d) / 2], 1)
    VT = torch.from_numpy((1 - cfg["q_mix"]) * onehot + cfg["q_mix"] * wdl)

    # training mode: losses and gradients
    model.train()
    p, v, l = model(x)
    lp = -(T * F.log_softmax(p, 1)).sum(1).mean()
    lv = -(VT * F.log_softmax(v, 1)).sum(1).mean()
    ll = F.binary_cross_entropy_with_logits(l, legal)
    loss = cfg["w_policy"] * lp + cfg["w_value"] * lv + cfg["w_legal"] * ll
    extra = []
    if heads:
        mlt = torch.from_numpy(io["in.moves_left"].astype(np.float64))
        has = mlt >= 0
        hub = F.huber_loss(model.ml[has], mlt[has] / 20.0, reduction="sum", delta=0.5)
        ooff, olab, oprob = io["in.opp_offsets"], io["in.opp_label"], io["in.opp_prob"]
        OT = np.zeros((B, 2187))
        for b in range(B):
            for j in range(ooff[b], ooff[b + 1]):
                OT[b, olab[j]] += oprob[j]
        OT = torch.from_numpy(OT)
        osum = -(OT * F.log_softmax(model.opp, 1)).sum()
        nopp = int((np.diff(ooff) > 0).sum())
        loss = loss + cfg["w_moves_left"] * hub / B + cfg["w_opp_policy"] * osum / B
        extra = [hub.item() / int(has.sum()), osum.item() / nopp]
    acc = np.mean(np.argmax(p.detach().numpy(), 1) == np.argmax(T.numpy(), 1))
    pred = l.detach().numpy() >= 0
    tgt = legal.numpy() > 0.5
    tp, fp, fn = (pred & tgt).sum(), (pred & ~tgt).sum(), (~pred & tgt).sum()
    f1 = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 1.0
    compare(tag + " losses (total, policy, value, legal)", io["out.metrics"][:4],
            [loss.item(), lp.item(), lv.item(), ll.item()], 1e-6, 1e-4)
    compare(tag + " policy top-1, legal F1", io["out.metrics"][4:6], [acc, f1], 1e-9, 0)
    if heads:
        compare(tag + " moves-left Huber, opponent cross-entropy", io["out.metrics"][6:], extra, 1e-6, 1e-4)
    model.zero_grad()
    loss.backward()
    named = dict(model.named_parameters())
    for name, prm in named.items():
        g = prm.grad.numpy()
        scale = np.abs(g).max()
        compare(tag + " grad " + name, io["grad." + name], g, 1e-7 + 2e-3 * scale, 0)

    # one optimizer step: clip, decoupled decay on conv/dense weights, Nesterov SGD
    params = list(named.values())
    torch.nn.utils.clip_grad_norm_(params, cfg["clip_norm"])
    with torch.no_grad():
        for name, prm in named.items():
            if prm.dim() >= 2:
                prm.mul_(1 - cfg["lr"] * cfg["weight_decay"])
    opt = torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"], nesterov=True)
    opt.step()
    sd = model.state_dict()
    for name in w:
        compare(tag + " after step " + name, io["after." + name], sd[name].numpy(), 2e-5, 1e-4)
    return True


ok = True
for tag in sys.argv[2:]:
    ok = run(tag) and ok
if ok and failures == 0:
    print("torch_ref.py: all match")
    verdict("pass", 0)
print("torch_ref.py: %d mismatching comparison(s)" % failures)
verdict("fail", 1)
