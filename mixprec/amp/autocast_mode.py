"""autocast: torch.amp cast policies applied at dispatch (issue 3)."""
__all__ = []
