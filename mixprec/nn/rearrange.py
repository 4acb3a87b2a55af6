"""Layers that rearrange values: PixelShuffle, PixelUnshuffle, ChannelShuffle, Unfold, Fold (their functions
are in ops/nn_rearrange.py)."""
from __future__ import annotations

from .activation import function_layer

PixelShuffle = function_layer("PixelShuffle", "pixel_shuffle", ("upscale_factor",), (),
                              "(*, C r^2, H, W) -> (*, C, H r, W r).")
PixelUnshuffle = function_layer("PixelUnshuffle", "pixel_unshuffle", ("downscale_factor",), (),
                                "(*, C, H r, W r) -> (*, C r^2, H, W).")
ChannelShuffle = function_layer("ChannelShuffle", "channel_shuffle", ("groups",), (),
                                "Interleave the channels of groups groups.")
Unfold = function_layer("Unfold", "unfold", ("kernel_size", "dilation", "padding", "stride"), (1, 0, 1),
                        "Sliding blocks as columns (im2col).")
Fold = function_layer("Fold", "fold", ("output_size", "kernel_size", "dilation", "padding", "stride"), (1, 0, 1),
                      "Columns summed back into an image (col2im), Unfold's adjoint.")
