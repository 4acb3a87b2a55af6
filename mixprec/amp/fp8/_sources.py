"""The FP8 kernels' source file and the C++ name expressions it must provide (mixprec.amp._kernels compiles them)."""
SOURCE = "fp8_scaling.cu"
INPUT_TYPES = {"float32": "float", "float16": "half_bits", "bfloat16": "bfloat16_bits"}
FORMATS = {"float8_e4m3fn": "fp8_e4m3fn", "float8_e5m2": "fp8_e5m2"}


def amax_kernel(dtype: str) -> str:
    return f"fp8_amax<{INPUT_TYPES[dtype]}>"


def cast_kernel(dtype: str, fp8_dtype: str) -> str:
    return f"fp8_cast<{INPUT_TYPES[dtype]}, {FORMATS[fp8_dtype]}>"


MODULES = {SOURCE: ("fp8_current_scale", "fp8_mx_scale", "fp8_delayed_update")
           + tuple(amax_kernel(d) for d in INPUT_TYPES)
           + tuple(cast_kernel(d, f) for d in INPUT_TYPES for f in FORMATS)}
