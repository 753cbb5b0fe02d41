#!/usr/bin/env python3
"""PyTorch's side of bench/peers/side-by-side: the same jobs as gpulab's bench programs, from the
same configuration (bench/peers.json), on the CPU, one thread per process.

    torch_peers.py mlp                  the MLP's training step, one process
    torch_peers.py ddp                  the same on W gloo processes: compute-only, DDP, no_sync,
                                        ZeRO-1 (ZeroRedundancyOptimizer with AdamW), local AdamW
    torch_peers.py allreduce            torch.distributed.all_reduce on gloo at the config's sizes
    torch_peers.py check DIR [--perturb REL [--perturb-array NAME]]
                                        gpulab's exported step (DIR/mlp.*, DIR/ddp.*) checked op
                                        by op against float64, and end to end beside PyTorch's
                                        float64 autograd and its own fp32 (below); exit 1 if any
                                        check fails

Each timing line has the key=value form of gpulab's bench programs. A benchmark only: nothing in
the build or the tests imports torch.

The checks (first-order rounding analysis in the manner of Higham, "Accuracy and Stability of
Numerical Algorithms", 2nd ed., §3.1-3.5: a sum of K products computed in fp32 is within
gamma_K = K·u·Σ|terms| of the exact sum, u = 2^-24):

1. Op by op, the sharp one. gpulab exports every op's fp32 output of one step (each layer's
   output, dL/dlogits, each dy, each gradient). Each is compared with the same op computed in
   float64 by PyTorch on gpulab's own fp32 inputs, within twice that op's own bound: a·W + b within
   (K + 2)u·(|a|·|W| + |b|); aᵀ·dy within (N + W + 4)u·|a|ᵀ·|dy|; (dy·Wᵀ) within (K + 2)u·|dy|·|W|ᵀ;
   softmax − one-hot within u·(|z − max z| + Σ p·|z − max z| + C + 5)·p. No error is carried from
   one op to the next, so the bounds are tight: an element moved by about 1e-5 of its size fails.
2. End to end. The float64 reference is PyTorch's autograd over the same weights and batch, each
   ReLU taking the side of 0 that the fp32 run took (at a kink either side is a derivative; a unit
   on the other side by more than its rounding fails). The allowed distance carries each op's
   error through the network with absolute values (|W| per layer, dy's error through |W|ᵀ): it is
   rigorous but loose, catching only gross errors (a gradient off by several times its size); its
   figure, and gpulab's distance from float64 beside PyTorch fp32's, are what it is for.
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as tnn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
U = 2.0 ** -24


def load_config(path):
    with open(path) as f:
        return json.load(f)


def mlp(widths):
    """Linear, ReLU, ..., Linear: gpulab::nn::Sequential::mlp's layers (torch keeps W as out x in)."""
    layers = []
    for i in range(len(widths) - 1):
        layers.append(tnn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(tnn.ReLU())
    return tnn.Sequential(*layers)


def median_ms(times_s):
    return statistics.median(times_s) * 1e3


def pin(rank):
    """One core per rank, as mpirun binds gpulab's ranks (rank r on core r); none with GPULAB_PEERS_BIND=none."""
    if os.environ.get("GPULAB_PEERS_BIND") == "none":
        return
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[rank % len(cores)]})


def random_batches(count, batch, features, classes, seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(batch, features, generator=g), torch.randint(0, classes, (batch,), generator=g)) for _ in range(count)]


# ------------------------------------------------------------------------------------------------
# Timing
# ------------------------------------------------------------------------------------------------

def time_mlp(cfg):
    c = cfg["mlp"]
    torch.set_num_threads(1)
    torch.manual_seed(c["model_seed"])
    model = mlp(c["widths"])
    opt = torch.optim.SGD(model.parameters(), lr=c["lr"], momentum=c["momentum"])
    steps = c["warmup"] + c["steps"]
    batches = random_batches(steps, c["batch"], c["widths"][0], c["widths"][-1], c["data_seed"])
    times, losses = [], []
    for s, (x, y) in enumerate(batches):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if s >= c["warmup"]:
            times.append(dt)
        losses.append(loss.item())
    ms = median_ms(times)
    print(f"torch-mlp ms={ms:.4f}")
    print(f"torch {torch.__version__}: {ms:.3f} ms/step (median of {len(times)} steps), {c['batch'] / (ms / 1e3):.0f} samples/s, "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f} (random batches: the time does not depend on the values)")


def init_gloo(rank, world, init_file):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)


def slowest(seconds):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def ddp_worker(rank, world, init_file, cfg, out_file):
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    pin(rank)
    torch.set_num_threads(1)
    init_gloo(rank, world, init_file)
    c, d = cfg["mlp"], cfg["ddp"]
    torch.manual_seed(c["model_seed"])
    plain = mlp(c["widths"])
    wrapped = mlp(c["widths"])
    wrapped.load_state_dict(plain.state_dict())
    # PyTorch DDP's first bucket is 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES) and the rest bucket_cap_mb.
    assert d["first_bucket_bytes"] == dist._DEFAULT_FIRST_BUCKET_BYTES, "DDP's first bucket is fixed at 1 MiB"
    ddp = DDP(wrapped, bucket_cap_mb=d["bucket_cap_bytes"] / 2**20)
    sgd_plain = torch.optim.SGD(plain.parameters(), lr=c["lr"], momentum=c["momentum"])
    sgd_ddp = torch.optim.SGD(ddp.parameters(), lr=c["lr"], momentum=c["momentum"])
    adamw = torch.optim.AdamW(plain.parameters(), lr=d["adamw_lr"])
    zero = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=d["adamw_lr"])
    micro = d["micro_batches"]
    names = ["compute", "ddp", "no_sync", "zero1", "adamw"]
    times = {n: [] for n in names}
    batches = random_batches(64, d["batch_per_rank"], c["widths"][0], c["widths"][-1], c["data_seed"] + rank)
    k = 0
    for rnd in range(d["warmup_rounds"] + d["rounds"]):
        for v, name in enumerate(names):
            xs = []
            for _ in range(micro if name == "no_sync" else 1):
                xs.append(batches[k % len(batches)])
                k += 1
            dist.barrier()
            t0 = time.perf_counter()
            if name in ("compute", "adamw"):
                opt = sgd_plain if name == "compute" else adamw
                opt.zero_grad(set_to_none=False)
                F.cross_entropy(plain(xs[0][0]), xs[0][1]).backward()
                opt.step()
            elif name in ("ddp", "zero1"):
                opt = sgd_ddp if name == "ddp" else zero
                opt.zero_grad(set_to_none=False)
                F.cross_entropy(ddp(xs[0][0]), xs[0][1]).backward()
                opt.step()
            else:
                sgd_ddp.zero_grad(set_to_none=False)
                with ddp.no_sync():
                    for x, y in xs[:-1]:
                        F.cross_entropy(ddp(x), y).backward()
                F.cross_entropy(ddp(xs[-1][0]), xs[-1][1]).backward()
                sgd_ddp.step()
            t = slowest(time.perf_counter() - t0)
            if rnd >= d["warmup_rounds"]:
                times[name].append(t)
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump({n: median_ms(times[n]) for n in names}, f)
    dist.destroy_process_group()


def allreduce_worker(rank, world, init_file, cfg, out_file):
    pin(rank)
    torch.set_num_threads(1)
    init_gloo(rank, world, init_file)
    c = cfg["allreduce"]
    rows = []
    for n in c["floats"]:
        pristine = torch.arange(n, dtype=torch.float32).remainder_(1000).div_(1000)
        data = pristine.clone()  # gloo sums in place: each run starts again from the same values
        # As gpulab::dist::time_collective: warm up until warmup_s has passed on every rank, then
        # samples runs between barriers, each the slowest rank's time; the median.
        warm_until = time.perf_counter() + c["warmup_s"]
        while True:
            data.copy_(pristine)
            dist.all_reduce(data)
            keep = torch.tensor([1 if time.perf_counter() < warm_until else 0])
            dist.all_reduce(keep, op=dist.ReduceOp.MAX)
            if keep.item() == 0:
                break
        samples = []
        for _ in range(c["samples"]):
            data.copy_(pristine)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(data)
            samples.append(slowest(time.perf_counter() - t0))
        rows.append((n, statistics.median(samples)))
    if rank == 0:
        with open(out_file, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def spawn(worker, world, cfg):
    with tempfile.TemporaryDirectory() as tmp:
        init_file, out_file = os.path.join(tmp, "init"), os.path.join(tmp, "out.json")
        mp.spawn(worker, args=(world, init_file, cfg, out_file), nprocs=world, join=True)
        with open(out_file) as f:
            return json.load(f)


def time_ddp(cfg):
    d = cfg["ddp"]
    m = spawn(ddp_worker, d["ranks"], cfg)
    print(f"torch-ddp W={d['ranks']} " + " ".join(f"{k}_ms={v:.4f}" for k, v in m.items()))
    print(f"torch {torch.__version__} (DDP on gloo, {d['ranks']} processes, medians of {d['rounds']} rounds): compute-only {m['compute']:.2f} ms; "
          f"DDP {m['ddp']:.2f} ms (exposed {m['ddp'] - m['compute']:.2f} ms); no_sync x{d['micro_batches']} {m['no_sync']:.2f} ms; "
          f"ZeRO-1 {m['zero1']:.2f} ms (exposed {m['zero1'] - m['adamw']:.2f} ms beside a local AdamW step)")


def time_allreduce(cfg):
    c = cfg["allreduce"]
    w = c["ranks"]
    for n, seconds in spawn(allreduce_worker, w, cfg):
        busbw = 4.0 * n / seconds * 2 * (w - 1) / w / 1e9
        print(f"torch-allreduce W={w} floats={n} gloo_s={seconds:.6f} gloo_busbw={busbw:.3f}")


# ------------------------------------------------------------------------------------------------
# Gradients against float64
# ------------------------------------------------------------------------------------------------

def load_export(directory, stem):
    with open(os.path.join(directory, stem + ".json")) as f:
        index = json.load(f)
    flat = np.fromfile(os.path.join(directory, stem + ".bin"), dtype="<f4")
    arrays = {}
    for a in index["arrays"]:
        n = a["rows"] * a["cols"]
        arrays[a["name"]] = torch.from_numpy(flat[a["offset"]:a["offset"] + n].copy()).reshape(a["rows"], a["cols"])
    return index, arrays


def layer_names(widths):
    """gpulab's parameter names: layer i (Linear at even positions, ReLU between) is 'i.weight'."""
    return [2 * i for i in range(len(widths) - 1)]


def exact_and_bound(index, arrays, relu_inputs):
    """The float64 loss and gradients of the exported step along the sides of 0 that the fp32
    computation's ReLUs took (@p relu_inputs: layer -> its fp32 input), and the bound on that
    computation's distance from them (see the module's docstring). Returns (loss, grads, bounds,
    loss_bound, switched, wrong): switched counts units whose side differs from the exact
    input's within its error (either side is then a derivative), wrong those beyond it."""
    widths, w = index["widths"], index["ranks"]
    x = arrays["x"].double()
    labels = torch.tensor(index["labels"])
    n = x.shape[0]
    ids = layer_names(widths)
    W = [arrays[f"value:{i}.weight"].double() for i in ids]  # in x out, as gpulab keeps it
    b = [arrays[f"value:{i}.bias"].double().reshape(-1) for i in ids]
    # Forward along the given sides, with each activation's error envelope.
    a, err, masks = [x], [torch.zeros_like(x)], []
    switched = wrong = 0
    for l in range(len(W)):
        z = a[-1] @ W[l] + b[l]
        e = err[-1] @ W[l].abs() + (W[l].shape[0] + 2) * U * (a[-1].abs() @ W[l].abs() + b[l].abs())
        if l + 1 < len(W):
            m = (relu_inputs[ids[l] + 1] > 0).double()
            differs = m != (z > 0).double()
            switched += int((differs & (z.abs() <= 2.0 * e)).sum().item())
            wrong += int((differs & (z.abs() > 2.0 * e)).sum().item())
            masks.append(m)
            a.append(z * m)
            err.append(e * m)
        else:
            logits, logit_err = z, e
    p = torch.softmax(logits, dim=1)
    onehot = F.one_hot(labels, widths[-1]).double()
    worst_logit = logit_err.max(dim=1, keepdim=True).values
    lse = torch.logsumexp(logits, dim=1)
    loss_bound = 2.0 * (2.0 * worst_logit.mean().item() + (n + widths[-1] + 5) * U * (lse.abs() + logits.abs().max(dim=1).values).mean().item())
    # The reference itself: PyTorch's float64 autograd along the same sides.
    Wg = [w_.clone().requires_grad_(True) for w_ in W]
    bg = [b_.clone().requires_grad_(True) for b_ in b]
    h = x
    for l in range(len(W)):
        h = h @ Wg[l] + bg[l]
        if l + 1 < len(W):
            h = h * masks[l]
    loss_t = F.cross_entropy(h, labels)
    loss_t.backward()
    loss = loss_t.item()
    autograd = {}
    for l, lid in enumerate(ids):
        autograd[f"{lid}.weight"] = Wg[l].grad
        autograd[f"{lid}.bias"] = bg[l].grad.reshape(1, -1)
    # Backward: the exact upstream gradient and its error envelope.
    dy = (p - onehot) / n
    E = (2.0 * p * worst_logit + (widths[-1] + 5) * U * (p + onehot)) / n
    grads, bounds = {}, {}
    total = n + w + 4
    for l in reversed(range(len(W))):
        lid = ids[l]
        A, D = a[l].abs(), dy.abs()
        grads[f"{lid}.weight"] = autograd[f"{lid}.weight"]
        grads[f"{lid}.bias"] = autograd[f"{lid}.bias"]
        bounds[f"{lid}.weight"] = 2.0 * (err[l].t() @ D + A.t() @ E + total * U * (A.t() @ D))
        bounds[f"{lid}.bias"] = 2.0 * (E.sum(dim=0, keepdim=True) + total * U * D.sum(dim=0, keepdim=True))
        if l == 0:
            break
        m = masks[l - 1]
        E = (E @ W[l].t().abs() + (W[l].shape[1] + 2) * U * (D @ W[l].t().abs())) * m
        dy = (dy @ W[l].t()) * m
    return loss, grads, bounds, loss_bound, switched, wrong


def compare(label, grads, exact, bounds, loss=None, exact_loss=None, loss_bound=None):
    worst, outside, checked = 0.0, 0, 0
    for name, g in exact.items():
        diff = (grads[name].double() - g).abs()
        ratio = diff / (bounds[name] + 1e-300)
        worst = max(worst, ratio.max().item())
        outside += int((diff > bounds[name]).sum().item())
        checked += g.numel()
    ok = outside == 0
    text = f"{checked - outside} of {checked} gradients within the bound (the largest difference {worst:.3g} of its bound)"
    if loss is not None:
        lr = abs(loss - exact_loss) / loss_bound
        ok = ok and lr <= 1.0
        text += f"; loss {loss:.7f} against {exact_loss:.7f} ({lr:.3g} of its bound)"
    print(f"check {'PASS' if ok else 'FAIL'}: {label}: {text}")
    return ok


def relu_inputs_of(model):
    """Forward hooks that keep each ReLU's input (torch's Sequential numbers layers as gpulab's)."""
    kept = {}
    for i, layer in enumerate(model):
        if isinstance(layer, tnn.ReLU):
            layer.register_forward_hook(lambda mod, inp, out, i=i: kept.__setitem__(i, inp[0].detach().clone()))
    return kept


def grads_of(model, widths):
    return {f"{lid}.{k}": (model[lid].weight.grad.t().clone() if k == "weight" else model[lid].bias.grad.reshape(1, -1).clone())
            for lid in layer_names(widths) for k in ("weight", "bias")}


def torch_fp32_grads(index, arrays, ranks):
    """PyTorch's own fp32 loss, gradients and ReLU inputs for the exported step: one process, or
    DDP on gloo over the ranks' batches (rank r has rows r·B .. (r+1)·B − 1 of x)."""
    model = mlp(index["widths"])
    with torch.no_grad():
        for lid in layer_names(index["widths"]):
            model[lid].weight.copy_(arrays[f"value:{lid}.weight"].t())
            model[lid].bias.copy_(arrays[f"value:{lid}.bias"].reshape(-1))
    if ranks == 1:
        kept = relu_inputs_of(model)
        loss = F.cross_entropy(model(arrays["x"]), torch.tensor(index["labels"]))
        loss.backward()
        return loss.item(), grads_of(model, index["widths"]), kept
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "grads.pt")
        mp.spawn(ddp_grad_worker, args=(ranks, os.path.join(tmp, "init"), index, arrays, model.state_dict(), out), nprocs=ranks, join=True)
        return torch.load(out)


def ddp_grad_worker(rank, world, init_file, index, arrays, state, out):
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    init_gloo(rank, world, init_file)
    model = mlp(index["widths"])
    model.load_state_dict(state)
    kept = relu_inputs_of(model)
    ddp = DDP(model)
    bpr = index["batch_per_rank"]
    x = arrays["x"][rank * bpr:(rank + 1) * bpr]
    y = torch.tensor(index["labels"][rank * bpr:(rank + 1) * bpr])
    loss = F.cross_entropy(ddp(x), y)
    loss.backward()
    t = torch.tensor([loss.item()], dtype=torch.float64)
    dist.all_reduce(t)
    sides = {}
    for i, z in sorted(kept.items()):
        parts = [torch.empty_like(z) for _ in range(world)]
        dist.all_gather(parts, z)
        sides[i] = torch.cat(parts)
    if rank == 0:
        torch.save((t.item() / world, grads_of(model, index["widths"]), sides), out)
    dist.destroy_process_group()


def local_checks(index, arrays):
    """gpulab's step op by op: each op's fp32 output (exported) against the same op in float64 on
    gpulab's own fp32 inputs, within twice that op's own rounding bound (no propagation, so the
    bounds are tight). Yields (what, worst difference over its bound)."""
    widths, w, bpr = index["widths"], index["ranks"], index["batch_per_rank"]
    n = w * bpr
    ids = layer_names(widths)
    last = ids[-1]
    labels = torch.tensor(index["labels"])
    d = {k: v.double() for k, v in arrays.items()}
    out_of = lambda lid: d["logits"] if lid == last else d[f"relu_input:{lid + 1}"]  # noqa: E731
    in_of = lambda lid: d["x"] if lid == 0 else torch.relu(d[f"relu_input:{lid - 1}"])  # noqa: E731

    def ratio(value, exact, bound):
        return ((value - exact).abs() / (bound + 1e-300)).max().item()

    for lid in ids:  # forward: z = a·W + b, K products each
        a, W, b = in_of(lid), d[f"value:{lid}.weight"], d[f"value:{lid}.bias"]
        bound = 2.0 * (W.shape[0] + 2) * U * (a.abs() @ W.abs() + b.abs())
        yield f"forward of layer {lid} (a·W + b)", ratio(out_of(lid), a @ W + b, bound)
    # The loss's gradient on each rank: (softmax − one-hot) / B.
    p = torch.softmax(d["logits"], dim=1)
    onehot = F.one_hot(labels, widths[-1]).double()
    # exp(z − max z): the subtraction's rounding, u·|z − max z|, is a relative error of each term.
    spread = (d["logits"] - d["logits"].max(dim=1, keepdim=True).values).abs()
    rel = U * (spread + (p * spread).sum(dim=1, keepdim=True) + widths[-1] + 5)
    bound = 2.0 * (rel * p + 2 * U * (p - onehot).abs()) / bpr
    yield "dL/dlogits ((softmax - one-hot) / B)", ratio(d[f"dy:{last}"], (p - onehot) / bpr, bound)
    logp = torch.log_softmax(d["logits"], dim=1)
    loss = -logp[torch.arange(n), labels].mean().item()
    loss_bound = 2.0 * (widths[-1] + n + 5) * U * (logp.abs().max(dim=1).values + d["logits"].abs().max(dim=1).values).mean().item()
    yield "loss (mean cross-entropy)", abs(index["loss"] - loss) / loss_bound
    for lid in reversed(ids):
        a, dy = in_of(lid), d[f"dy:{lid}"]
        # The rank-averaged gradient: (1/W) Σ_r a_rᵀ·dy_r, N = W·B products per weight.
        bound = 2.0 * (n + w + 4) * U * (a.abs().t() @ dy.abs()) / w
        yield f"gradient of {lid}.weight (aᵀ·dy{', averaged over ' + str(w) + ' ranks' if w > 1 else ''})", ratio(d[f"grad:{lid}.weight"], a.t() @ dy / w, bound)
        bound = 2.0 * (n + w + 4) * U * dy.abs().sum(dim=0, keepdim=True) / w
        yield f"gradient of {lid}.bias (column sums of dy)", ratio(d[f"grad:{lid}.bias"], dy.sum(dim=0, keepdim=True) / w, bound)
        if lid > 0:  # dy of the layer below: (dy·Wᵀ) where its ReLU passed
            W = d[f"value:{lid}.weight"]
            mask = (d[f"relu_input:{lid - 1}"] > 0).double()
            bound = 2.0 * (W.shape[1] + 2) * U * (dy.abs() @ W.t().abs()) * mask
            yield f"dy of layer {lid - 2} ((dy·Wᵀ) where the ReLU passed)", ratio(d[f"dy:{lid - 2}"], (dy @ W.t()) * mask, bound)


def check(directory, perturb, perturb_array="grad:0.weight"):
    """gpulab's exports: op by op (tight), and end to end against PyTorch's float64 autograd
    (the loose envelope of the docstring), beside PyTorch's own fp32 (one process, or DDP on
    gloo) through the same end-to-end check."""
    ok = True
    for stem, who in (("mlp", "gpulab::nn's MLP"), ("ddp", "lab 08's Reducer (averaged over the ranks)")):
        if not os.path.exists(os.path.join(directory, stem + ".json")):
            print(f"check FAIL: {directory}/{stem}.json is missing (run gpulab's bench program with --export first)")
            ok = False
            continue
        index, arrays = load_export(directory, stem)
        if perturb:
            # The check's own check: one element (the largest) of one array moved by REL of its size.
            g = arrays[perturb_array]
            k = int(g.abs().argmax())
            g.view(-1)[k] *= 1.0 + perturb
        n, w = arrays["x"].shape[0], index["ranks"]
        assert n == w * index["batch_per_rank"]
        head = f"{who}, {w} rank(s) x {index['batch_per_rank']} samples"
        worst_name, worst = "", 0.0
        for what, r in local_checks(index, arrays):
            if r > worst:
                worst_name, worst = what, r
            if not r <= 1.0:
                print(f"check FAIL: gpulab: {head}: {what}: {r:.3g} of its bound")
                ok = False
        print(f"check {'PASS' if worst <= 1.0 else 'FAIL'}: gpulab op by op: {head}: every forward, loss, dy and gradient within twice its "
              f"op's rounding bound of float64 on gpulab's own inputs (the largest: {worst:.3g} of its bound, {worst_name})")
        ours = {name[len("grad:"):]: t for name, t in arrays.items() if name.startswith("grad:")}
        sides = {int(name[len("relu_input:"):]): t for name, t in arrays.items() if name.startswith("relu_input:")}
        runs = [(f"gpulab end to end: {head}", ours, index["loss"], sides)]
        if not perturb:
            tl, tg, tz = torch_fp32_grads(index, arrays, w)
            runs.append((f"PyTorch {torch.__version__} end to end ({'DDP on gloo' if w > 1 else 'autograd'}, fp32, the same weights and batch)", tg, tl, tz))
        for label, grads, loss, relu_in in runs:
            exact_loss, exact, bounds, loss_bound, switched, wrong = exact_and_bound(index, arrays, relu_in)
            label += f", {switched} ReLU input(s) within rounding of 0"
            if wrong:
                print(f"check FAIL: {label}: {wrong} ReLU input(s) on the wrong side of 0 by more than their rounding")
                ok = False
            ok &= compare(label, grads, exact, bounds, loss, exact_loss, loss_bound)
        if not perturb:
            diff = max(((ours[k] - tg[k]).abs().max() / tg[k].abs().max()).item() for k in ours)
            exact = exact_and_bound(index, arrays, sides)[1]
            ours_off = max(((ours[k].double() - exact[k]).abs().max() / exact[k].abs().max()).item() for k in ours)
            theirs_off = max(((tg[k].double() - exact[k]).abs().max() / exact[k].abs().max()).item() for k in ours)
            print(f"gpulab beside PyTorch fp32: the largest gradient difference is {diff:.2g} of its tensor's largest gradient; "
                  f"from float64, gpulab's is {ours_off:.2g} and PyTorch's {theirs_off:.2g}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["mlp", "ddp", "allreduce", "check"])
    ap.add_argument("directory", nargs="?", help="check: the folder gpulab's bench programs exported to")
    ap.add_argument("--config", default=os.path.join(HERE, "..", "peers.json"))
    ap.add_argument("--perturb", type=float, default=0.0, help="check: move the largest element of one exported array by this fraction (the check must then fail)")
    ap.add_argument("--perturb-array", default="grad:0.weight", help="check: which array --perturb moves (grad:0.weight, dy:2, relu_input:1, ...)")
    args = ap.parse_args()
    cfg = load_config(args.config)
    if args.what == "mlp":
        time_mlp(cfg)
    elif args.what == "ddp":
        time_ddp(cfg)
    elif args.what == "allreduce":
        time_allreduce(cfg)
    else:
        if not args.directory:
            ap.error("check needs the export folder")
        sys.exit(0 if check(args.directory, args.perturb, args.perturb_array) else 1)


if __name__ == "__main__":
    main()
