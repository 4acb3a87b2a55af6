"""The shortest complete AMP training loop: no nn.Module, just weight tensors, mp functions,
autocast and a GradScaler. Learns to classify points of three interleaved spirals.

    python examples/numpy_style.py
"""
import math

import numpy as np

import mixprec as mp
import mixprec.nn.functional as F

device = "cuda" if mp.is_cuda_available() else "cpu"
mp.manual_seed(0)

# Data: 3 spirals of 200 points each, a problem a linear model cannot solve.
rng = np.random.default_rng(0)
t = np.sqrt(rng.random(600)) * 3 * math.pi
label = np.repeat(np.arange(3), 200)
angle = t + label * 2 * math.pi / 3
points = np.stack([t * np.cos(angle), t * np.sin(angle)], 1) / 10 + rng.normal(0, 0.02, (600, 2))
x = mp.tensor(points.astype(np.float32), device=device)
y = mp.tensor(label, device=device)

# Parameters: float32 "master weights". Under autocast the matmuls see float16 copies.
w1 = (mp.randn(2, 64, device=device) * math.sqrt(2 / 2)).requires_grad_()
b1 = mp.zeros(64, device=device, requires_grad=True)
w2 = (mp.randn(64, 64, device=device) * math.sqrt(2 / 64)).requires_grad_()
b2 = mp.zeros(64, device=device, requires_grad=True)
w3 = (mp.randn(64, 3, device=device) * math.sqrt(1 / 64)).requires_grad_()
b3 = mp.zeros(3, device=device, requires_grad=True)
params = [w1, b1, w2, b2, w3, b3]

optimizer = mp.optim.Adam(params, lr=0.01)
scaler = mp.GradScaler(device)  # float16 needs loss scaling; its range ends at 65504

for step in range(301):
    with mp.autocast(device, dtype=mp.float16):
        h = F.relu(x @ w1 + b1)                 # matmul runs in float16 (autocast's lower-precision list)
        h = F.relu(h @ w2 + b2)
        loss = F.cross_entropy(h @ w3 + b3, y)  # cross_entropy runs in float32 (autocast's fp32 list)
    optimizer.zero_grad()
    scaler.scale(loss).backward()               # backward of the scaled loss: small gradients survive float16
    scaler.step(optimizer)                      # unscale; skip the update if a gradient is inf/NaN
    scaler.update()                             # adjust the scale for the next step
    if step % 100 == 0:
        print(f"step {step:3d}  loss {loss.item():.4f}  scale {scaler.get_scale():g}")

with mp.no_grad(), mp.autocast(device, dtype=mp.float16):
    first = x @ w1
    logits = F.relu(F.relu(first + b1) @ w2 + b2) @ w3 + b3
print(f"weights stay {w1.dtype.name}; under autocast x @ w1 is {first.dtype.name}")
print(f"train accuracy: {(logits.argmax(dim=1) == y).float().mean().item():.4f}")
