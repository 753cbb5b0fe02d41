"""PyTorch beside lab 05's speed cases, on the GPU, at the same sizes: softmax and LayerNorm over
8192 x 8192 fp32 rows (forward, and LayerNorm's backward through autograd), and fp32
scaled_dot_product_attention at 8 heads x 4096 x 64 (not causal). Each is timed with CUDA events,
the median of 20 after 5 of warm-up, on random inputs; bandwidth counts the bytes lab 05's tests
count as the minimum (fusion.hpp). A side-by-side anchor only: nothing in the build or the tests
imports it.

    python3 bench/peers/lab05_torch.py      (on a machine with a CUDA GPU and PyTorch)
"""
import statistics
import torch
import torch.nn.functional as F


def median_ms(fn, warm=5, reps=20):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    dev = torch.device("cuda")
    n = 8192
    x = torch.rand(n, n, device=dev) * 2 - 1
    dy = torch.rand(n, n, device=dev) * 2 - 1
    gamma = torch.rand(n, device=dev) + 0.5
    beta = torch.rand(n, device=dev) - 0.5
    src = torch.empty(n * n, device=dev)
    dst = torch.empty_like(src)
    copy_ms = median_ms(lambda: dst.copy_(src))
    copy_gbs = 2 * 4 * n * n / copy_ms / 1e6
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"device copy {n}x{n} fp32: {copy_ms:.3f} ms, {copy_gbs:.0f} GB/s (read + written)")

    def row(name, ms, min_bytes):
        gbs = min_bytes / ms / 1e6
        print(f"{name}: {ms:.3f} ms, {gbs:.0f} GB/s, {gbs / copy_gbs:.2f} of the copy")

    row("torch.softmax 8192x8192", median_ms(lambda: torch.softmax(x, dim=-1)), 2 * 4 * n * n)
    row("F.layer_norm forward 8192x8192", median_ms(lambda: F.layer_norm(x, (n,), gamma, beta, 1e-5)),
        4 * (2 * n * n + 2 * n + 2 * n))
    xr = x.clone().requires_grad_(True)
    gr = gamma.clone().requires_grad_(True)
    br = beta.clone().requires_grad_(True)
    y = F.layer_norm(xr, (n,), gr, br, 1e-5)
    # Backward alone: autograd's LayerNorm backward reads dy, x, gamma and the saved mean and rstd,
    # writes dx, dgamma, dbeta (lab 05's minimum: 3 n^2 + 3 n + 2 rows floats).
    row("F.layer_norm backward 8192x8192",
        median_ms(lambda: torch.autograd.grad(y, (xr, gr, br), dy, retain_graph=True)),
        4 * (3 * n * n + 3 * n + 2 * n))
    heads, seq, dim = 8, 4096, 64
    q, k, v = (torch.randn(1, heads, seq, dim, device=dev) for _ in range(3))
    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v))
    flops = 4.0 * dim * seq * seq * heads
    print(f"F.scaled_dot_product_attention fp32 {heads}x{seq}x{dim}: {ms:.3f} ms, {flops / ms / 1e9:.1f} TFLOP/s")
    s_ms = median_ms(lambda: torch.softmax(q @ k.transpose(-1, -2) / dim ** 0.5, dim=-1) @ v)
    print(f"unfused matmul-softmax-matmul fp32 (TF32 {torch.backends.cuda.matmul.allow_tf32}): {s_ms:.3f} ms")


if __name__ == "__main__":
    main()
