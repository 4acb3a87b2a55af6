"""tools/make_figures.py draws every picture of the docs, and its loss-scale run is a real one."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")
TOOL = Path(__file__).resolve().parents[1] / "tools" / "make_figures.py"
spec = importlib.util.spec_from_file_location("make_figures", TOOL)
make_figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_figures)


def test_every_figure_is_drawn(tmp_path):
    quick = [name for name in make_figures.FIGURES if name != "fp8_gpt"]   # that one trains for a minute or more
    assert make_figures.main(["--out", str(tmp_path), "--only", ",".join(quick)]) == 0
    for name in quick:
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000


def test_the_fp8_figure_is_the_examples_plot(tmp_path):
    """fp8_gpt runs examples/train_gpt.py --fp8 delayed; here for a few steps (the full run is the docs' figure)."""
    pytest.importorskip("tqdm")
    make_figures.fp8_gpt(tmp_path / "fp8_gpt.png", "--steps", "8", "--layers", "1")
    png = (tmp_path / "fp8_gpt.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 50_000


def test_the_loss_scale_backs_off_then_grows():
    scales, skipped = make_figures.loss_scale_run(steps=80, growth_interval=20)
    assert skipped[0] and scales[0] == 2.0 ** 24                     # 2^24 overflows float16 gradients
    first_kept = int(np.argmin(skipped))
    assert np.all(np.diff(np.log2(scales[:first_kept + 1])) == -1)   # halved at each skipped step
    assert scales[-1] > scales[first_kept]                           # then it grows again


def test_an_unknown_figure_is_refused():
    with pytest.raises(SystemExit):
        make_figures.main(["--only", "nope"])
