"""GradScaler: dynamic loss scaling on fused kernels (issue 4)."""
__all__ = []
