"""Loss modules: each holds its options and calls its loss in mp.nn.functional.

The math, the gradients and the autocast policy live in the loss op
(mixprec/ops/losses.py); a module only remembers how it was configured.
"""
from __future__ import annotations

from . import functional as F
from .module import Module


class _Loss(Module):
    """A loss module: the reduction ('mean', 'sum' or 'none') every loss takes."""

    def __init__(self, reduction: str = "mean", allowed=("mean", "sum", "none")):
        super().__init__()
        if reduction not in allowed:
            raise ValueError(f"{type(self).__name__}: reduction must be one of "
                             f"{', '.join(repr(r) for r in allowed)}, got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction='{self.reduction}'" if self.reduction != "mean" else ""


class CrossEntropyLoss(_Loss):
    """Cross entropy of logits (N, C, ...) against class indices or class probabilities."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """Negative log likelihood of log-probabilities (N, C, ...) against class indices."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class BCELoss(_Loss):
    """Binary cross entropy of probabilities; banned under CUDA autocast (use BCEWithLogitsLoss)."""

    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of sigmoid(logits), computed stably; safe under autocast."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class HuberLoss(_Loss):
    """0.5 d**2 where |d| < delta, else delta * (|d| - 0.5 delta)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """KL divergence of log-probabilities from target probabilities; 'batchmean' is the true KL."""

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        super().__init__(reduction, allowed=("mean", "sum", "none", "batchmean"))
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class PoissonNLLLoss(_Loss):
    """Negative log-likelihood of counts under a Poisson of rate exp(input) (log_input) or input."""

    def __init__(self, log_input: bool = True, full: bool = False, eps: float = 1e-8, reduction: str = "mean"):
        super().__init__(reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class _MarginLoss(_Loss):
    def __init__(self, margin: float, reduction: str = "mean"):
        super().__init__(reduction)
        self.margin = margin

    def extra_repr(self):
        return ", ".join(filter(None, [f"margin={self.margin}", super().extra_repr()]))


class CosineEmbeddingLoss(_MarginLoss):
    """1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__(margin, reduction)

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    """input for target 1, max(0, margin - input) for target -1."""

    def __init__(self, margin: float = 1.0, reduction: str = "mean"):
        super().__init__(margin, reduction)

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    """max(0, -target * (x1 - x2) + margin): ranks x1 above x2 for target 1."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__(margin, reduction)

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class TripletMarginLoss(_MarginLoss):
    """max(0, d(anchor, positive) - d(anchor, negative) + margin), d the p-norm distance."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 reduction: str = "mean"):
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: margin must be greater than 0, got {margin}")
        super().__init__(margin, reduction)
        self.p, self.eps, self.swap = p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """log(1 + exp(-target * input)) for targets of 1 and -1."""

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiMarginLoss(_MarginLoss):
    """Multi-class hinge loss over class scores (N, C) and class indices (N,)."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, reduction: str = "mean"):
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p!r}")
        super().__init__(margin, reduction)
        self.p = p
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss; each target row lists its classes, ended by -1."""

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """Binary logistic loss per class for 0/1 targets, averaged over the classes."""

    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class CTCLoss(_Loss):
    """CTC loss of log-probabilities (T, N, C) against unsegmented target sequences (see F.ctc_loss)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=self.blank,
                          reduction=self.reduction, zero_infinity=self.zero_infinity)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log likelihood of target under N(input, var) (var clamped to at least eps)."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """max(margin + d(anchor, positive) - d(anchor, negative), 0) for a distance function d."""

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False, reduction: str = "mean"):
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: margin must be greater than 0, got {margin}")
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)
