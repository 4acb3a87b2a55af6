"""Automatic mixed precision: autocast (autocast_mode), loss scaling (grad_scaler), FP8 recipes (fp8.recipes)."""
from ..ops.registry import CastPolicy  # noqa: F401
from .autocast_mode import *  # noqa: F401,F403
from .switches import set_autocast_cache_enabled, set_autocast_dtype, set_autocast_enabled  # noqa: F401
from .grad_scaler import *  # noqa: F401,F403  (GradScaler, StaticGradScaler)
from .master_weights import MasterWeights, master_params  # noqa: F401  (float32 masters of a float16 model)
from .opt_levels import initialize  # noqa: F401  (apex's O0-O3)
from .apex import load_state_dict, loss_scaler, scale_loss, state_dict  # noqa: F401  (apex's loop)
from . import functional  # noqa: F401  (mp.amp.functional: unscale/update on raw arrays)
from .inspector import inspect  # noqa: F401,E402  (mp.amp.inspect: where lower precision hurts a model)
from .fp8.recipes import CurrentScaling, DelayedScaling, Float8CurrentScaling, Format, MXFP8BlockScaling  # noqa: F401
from .fp8.autocast import fp8_autocast  # noqa: F401,E402  (mp.amp.fp8_autocast: nn.Linear's GEMMs in FP8)
