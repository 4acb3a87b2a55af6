"""A GPU AMP step makes the host wait for nothing and copies nothing to the device (counted on the strict stand-in).

The strict CuPy stand-in (MIXPREC_CUPY=strict, mixprec.strict_cupy) counts every blocking device-to-host read and
every host-to-device copy. After two warm-up steps (kernels compiled, tables written, state made), one more AMP
training step of a GPT block and of a CNN must make none of either: float16 with a GradScaler and bfloat16
without one, fused or per-tensor optimizer, with and without gradient clipping. On a real GPU these tests skip:
CuPy counts nothing (the stand-in is the instrument).
"""
from __future__ import annotations

import pytest

import mixprec as mp
import mixprec.nn as nn
import mixprec.nn.functional as F

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(mp.backend.strict_standin() is None, reason="counts come from the "
                                                  "strict CuPy stand-in (MIXPREC_CUPY=strict)")]


class Block(nn.Module):
    """A GPT block: pre-norm causal self-attention and MLP, with an embedding and a head around it."""

    def __init__(self, vocab=11, width=16, heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.head = nn.Linear(width, vocab)
        self.heads = heads

    def forward(self, tokens):
        x = self.embed(tokens)
        b, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, w))
        x = x + self.mlp(self.norm2(x))
        return self.head(x)


def _gpt():
    model = Block().to("cuda")
    tokens = mp.randint(0, 11, (4, 8), device="cuda")
    return model, tokens[:, :-1], tokens[:, 1:]


def _cnn():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.AvgPool2d(2), nn.Flatten(), nn.Linear(16, 3)).to("cuda")
    return model, mp.randn(6, 1, 8, 8, device="cuda"), mp.randint(0, 3, (6,), device="cuda")


@pytest.mark.parametrize("clip", [False, True], ids=["no-clip", "clip"])
@pytest.mark.parametrize("fused", [False, True], ids=["per-tensor", "fused"])
@pytest.mark.parametrize("dtype", [mp.float16, mp.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("make", [_gpt, _cnn], ids=["gpt-block", "cnn"])
def test_a_steady_amp_step_neither_reads_back_nor_uploads(make, dtype, fused, clip):
    strict_cupy = mp.backend.strict_standin()
    mp.manual_seed(0)
    model, x, y = make()
    opt = mp.optim.AdamW(model.parameters(), lr=1e-3, fused=fused)
    scaler = mp.amp.GradScaler("cuda", enabled=dtype == mp.float16)

    def step():
        opt.zero_grad()
        with mp.autocast("cuda", dtype=dtype):
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        scaler.scale(loss).backward()
        if clip:
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        return loss

    step(), step()
    with strict_cupy.counting() as seen:
        loss = step()
    assert (seen.host_reads, seen.uploads) == (0, 0), seen
    assert seen.launches > 0
    assert 0 < loss.item() < 10  # (read after counting) it trained on real numbers
