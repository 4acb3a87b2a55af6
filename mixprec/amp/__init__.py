"""Automatic mixed precision: autocast and loss scaling."""
from ..ops.registry import CastPolicy  # noqa: F401
