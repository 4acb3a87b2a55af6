"""FP8 training's building blocks: recipes as data (recipes), and the scale arithmetic on arrays (scaling),
run by the CUDA kernels of kernels/fp8_scaling.cu on CuPy arrays and by their NumPy twins on NumPy arrays."""
