#!/usr/bin/env python3
"""PyTorch's side of the GPT side-by-side (bench/peers/gpt-side-by-side runs both).

The same model as gpulab::nn::GPTConfig::tiny() (4 pre-LN blocks, 4 heads, d = 128, context 128,
bytes, tied LM head, exact-erf GELU, no dropout), the same batch (8 windows of 128 bytes of the
course's own lessons) and AdamW, on one CPU thread. Prints one line:
    torch <version>: <tokens/s> tokens/s (<ms> ms/step, median of <n> steps), loss <first> -> <last>
A benchmark only: nothing in the build or the tests imports torch.
"""
import argparse
import glob
import math
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.nn as tnn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Block(tnn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = tnn.LayerNorm(d)
        self.c_attn = tnn.Linear(d, 3 * d)
        self.c_proj = tnn.Linear(d, d)
        self.ln_2 = tnn.LayerNorm(d)
        self.c_fc = tnn.Linear(d, 4 * d)
        self.mlp_proj = tnn.Linear(4 * d, d)
        self.register_buffer("mask", torch.triu(torch.ones(128, 128, dtype=torch.bool), diagonal=1))

    def attention(self, x):
        B, T, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        shape = (B, T, self.heads, d // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # torch ≥ 2.0: its fused causal path
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch 1.x (Debian 12's 1.13): the written-out form, as gpulab's
            s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            s = s.masked_fill(self.mask[:T, :T], float("-inf"))
            y = F.softmax(s, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(B, T, d))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(tnn.Module):
    def __init__(self, vocab=256, context=128, layers=4, heads=4, d=128):
        super().__init__()
        self.wte = tnn.Embedding(vocab, d)
        self.wpe = tnn.Embedding(context, d)
        self.h = tnn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = tnn.LayerNorm(d)
        # GPT-2's initialisation, as gpulab's: N(0, 0.02²), the residual projections N(0, 0.02²/(2·layers)), biases 0.
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                tnn.init.zeros_(p)
            elif "ln_" in name:
                tnn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                tnn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        return self.ln_f(x) @ self.wte.weight.t()  # the head is the token table


def lessons_bytes(lessons):
    data = bytearray()
    for path in sorted(glob.glob(os.path.join(lessons, "*.md")), key=os.path.basename):
        with open(path, "rb") as f:
            data += f.read() + b"\n"
    return bytes(data[: len(data) // 10 * 9])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--lessons", default=os.path.join(here, "..", "..", "lessons"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    text = torch.tensor(list(lessons_bytes(args.lessons)), dtype=torch.long)
    T = 128
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    g = torch.Generator().manual_seed(1)
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        starts = torch.randint(0, len(text) - T, (args.batch,), generator=g)
        x = torch.stack([text[s : s + T] for s in starts])
        y = torch.stack([text[s + 1 : s + T + 1] for s in starts])
        t0 = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(dt)
        losses.append(loss.item())
    ms = statistics.median(times) * 1000
    print(f"torch {torch.__version__}: {args.batch * T / (ms / 1000):.0f} tokens/s ({ms:.1f} ms/step, median of {len(times)} steps), "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f} (ln 256 = {math.log(256):.3f})")


if __name__ == "__main__":
    main()
