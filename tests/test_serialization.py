"""mp.save / mp.load: exact round trips, the documented format, atomic saves and clear errors."""
import io
import json
import os
import threading
import zipfile

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec import serialization
from mixprec.serialization import CheckpointError


def bits(t):
    a = t.numpy() if isinstance(t, mp.Tensor) else t
    return a.tobytes()


def test_round_trip_of_nested_values(tmp_path):
    w = mp.nn.Parameter(mp.randn(3, 4))
    obj = {"model": {"w": w, "idx": mp.tensor([1, 2, 3]), "flag": mp.tensor([True, False])},
           "tied": w, 3: [1, 2.5, -0.0, float("inf"), None, "text", (1, "a"), b"\x00\xff"], None: True,
           "np": np.arange(6, dtype=np.uint8).reshape(2, 3), "scalar": np.float32(1.5), 0.5: {"deep": [[]]}}
    mp.save(obj, tmp_path / "ck.mp")
    back = mp.load(tmp_path / "ck.mp")
    assert list(back) == list(obj)
    assert isinstance(back["model"]["w"], mp.nn.Parameter) and back["model"]["w"].requires_grad
    assert back["tied"] is back["model"]["w"]  # shared tensors stay shared
    assert bits(back["model"]["w"]) == bits(w)
    assert back["model"]["idx"].dtype == mp.int64 and back["model"]["flag"].dtype == mp.bool_
    lst = back[3]
    assert lst[:2] == [1, 2.5] and type(lst[0]) is int and np.signbit(lst[2]) and lst[3] == float("inf")
    assert lst[4:] == [None, "text", (1, "a"), b"\x00\xff"] and isinstance(lst[6], tuple)
    assert back[None] is True and back[0.5] == {"deep": [[]]}
    assert back["np"].dtype == np.uint8 and back["np"].shape == (2, 3) and isinstance(back["np"], np.ndarray)
    assert back["scalar"] == np.float32(1.5) and isinstance(back["scalar"], np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_half_precision_is_bit_exact_including_special_values(tmp_path, dtype):
    npdt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[npdt.itemsize]
    raw = np.random.default_rng(0).integers(0, np.iinfo(width).max, 257, dtype=width, endpoint=True)
    arr = raw.view(npdt)  # every bit pattern: NaN payloads, subnormals, -0.0, inf
    t = mp.from_numpy(arr.copy())
    mp.save({"t": t, "a": arr}, tmp_path / "x.mp")
    back = mp.load(tmp_path / "x.mp")
    assert back["t"].dtype == getattr(mp, dtype)
    assert bits(back["t"]) == arr.tobytes() and back["a"].tobytes() == arr.tobytes()


def test_the_documented_format(tmp_path):
    mp.save({"w": mp.ones(2, dtype=mp.bfloat16), "lr": 0.001}, tmp_path / "f.mp")
    with zipfile.ZipFile(tmp_path / "f.mp") as zf:
        assert zf.namelist() == ["manifest.json", "buffers/0"]
        manifest = json.loads(zf.read("manifest.json"))
        assert manifest["format"] == "mixprec-checkpoint" and manifest["version"] == 1
        items = dict((k["v"], v) for k, v in manifest["root"]["items"])
        assert items["w"] == {"t": "tensor", "dtype": "bfloat16", "shape": [2], "device": "cpu",
                              "requires_grad": False, "parameter": False, "buffer": 0}
        assert items["lr"] == {"t": "float", "v": "0.001"}
        assert zf.read("buffers/0") == np.ones(2, dtype=ml_dtypes.bfloat16).tobytes()  # little-endian raw bytes
        assert zf.getinfo("buffers/0").compress_type == zipfile.ZIP_STORED


def test_same_object_gives_the_same_bytes_and_file_objects_work(tmp_path):
    obj = {"a": mp.arange(5), "b": [1.0, "x"]}
    mp.save(obj, tmp_path / "1.mp")
    mp.save(obj, tmp_path / "2.mp")
    assert (tmp_path / "1.mp").read_bytes() == (tmp_path / "2.mp").read_bytes()
    buf = io.BytesIO()
    mp.save(obj, buf)
    assert buf.getvalue() == (tmp_path / "1.mp").read_bytes()
    buf.seek(0)
    assert mp.load(buf)["b"] == [1.0, "x"]


def test_map_location_and_unavailable_devices(tmp_path):
    mp.save({"t": mp.ones(2)}, tmp_path / "c.mp")
    assert mp.load(tmp_path / "c.mp", map_location="cpu")["t"].device == "cpu"
    assert mp.load(tmp_path / "c.mp", map_location={"cpu": "cpu"})["t"].device == "cpu"
    with zipfile.ZipFile(tmp_path / "c.mp") as zf:
        manifest = json.loads(zf.read("manifest.json"))
        payload = zf.read("buffers/0")
    manifest["root"]["items"][0][1]["device"] = "cuda:0"
    with zipfile.ZipFile(tmp_path / "g.mp", "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("buffers/0", payload)
    if not mp.is_cuda_available():
        with pytest.raises(mp.DeviceUnavailableError, match="map_location='cpu'"):
            mp.load(tmp_path / "g.mp")
    assert mp.load(tmp_path / "g.mp", map_location="cpu")["t"].device == "cpu"
    with pytest.raises(TypeError, match="map_location"):
        mp.load(tmp_path / "c.mp", map_location=3)


@pytest.mark.parametrize("obj, message", [
    ({"m": object()}, r"cannot store a object at obj\['m'\]"),
    ([{1, 2}], r"set at obj\[0\]"),
    ({("a", 1): 1}, "dict key"),
    ({"a": np.array(["x"])}, "dtype"),
    ({"m": mp.nn.Linear(2, 2)}, "state_dict"),
])
def test_unsupported_values_name_where_they_are(tmp_path, obj, message):
    with pytest.raises(TypeError, match=message):
        mp.save(obj, tmp_path / "bad.mp")
    assert not os.listdir(tmp_path)  # nothing written, no temporary file left


def corrupt(tmp_path, edit):
    path = tmp_path / "c.mp"
    mp.save({"w": mp.randn(64), "s": "hello"}, path)
    data = bytearray(path.read_bytes())
    path.write_bytes(edit(data))
    return path


@pytest.mark.parametrize("edit, message", [
    (lambda d: d[:len(d) // 2], "truncated"),
    (lambda d: d[:-10], "truncated"),
    (lambda d: b"", "truncated"),
    (lambda d: b"not a checkpoint at all" * 10, "not a mixprec checkpoint"),
])
def test_truncated_or_foreign_files(tmp_path, edit, message):
    with pytest.raises(CheckpointError, match=message):
        mp.load(corrupt(tmp_path, edit))


def test_flipped_bytes_anywhere_in_a_buffer_are_detected(tmp_path):
    path = corrupt(tmp_path, lambda d: d)
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("buffers/0")
    start = info.header_offset + 30 + len(info.filename)  # local header, then the raw payload
    for offset in (0, 100, info.file_size - 1):
        bad = bytearray(data)
        bad[start + offset] ^= 0x01
        path.write_bytes(bytes(bad))
        with pytest.raises(CheckpointError, match="buffer 0 is corrupted"):
            mp.load(path)


def test_a_manipulated_manifest_is_rejected_without_running_anything(tmp_path):
    def write(manifest, buffers=()):
        with zipfile.ZipFile(tmp_path / "m.mp", "w") as zf:
            zf.writestr("manifest.json", manifest if isinstance(manifest, str) else json.dumps(manifest))
            for i, b in enumerate(buffers):
                zf.writestr(f"buffers/{i}", b)
        return tmp_path / "m.mp"
    good = {"format": "mixprec-checkpoint", "version": 1, "buffers": []}
    cases = [
        ("{not json", "manifest is corrupted"),
        (good | {"version": 99}, "version 99"),
        (good | {"format": "pickle"}, "not a mixprec checkpoint"),
        (good | {"root": {"t": "__import__('os')"}}, "unknown node type"),
        (good | {"root": {"t": "int", "v": "12"}}, "int node"),
        (good | {"root": {"t": "tensor", "buffer": 0, "dtype": "object", "shape": [1]}}, "unknown dtype"),
        (good | {"root": {"t": "list"}}, "malformed"),
    ]
    for manifest, message in cases:
        with pytest.raises(CheckpointError, match=message):
            mp.load(write(manifest))
    shape_lie = good | {"root": {"t": "ndarray", "buffer": 0, "dtype": "float32", "shape": [3]},
                        "buffers": [{"nbytes": 4, "sha256": __import__("hashlib").sha256(b"abcd").hexdigest()}]}
    with pytest.raises(CheckpointError, match="does not fit shape"):
        mp.load(write(shape_lie, [b"abcd"]))
    with zipfile.ZipFile(tmp_path / "plain.zip", "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(CheckpointError, match="no manifest.json"):
        mp.load(tmp_path / "plain.zip")


def test_a_crash_while_saving_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.mp"
    mp.save({"step": 1}, path)
    before = path.read_bytes()

    def crash(fh, manifest, buffers):
        fh.write(b"partial")
        raise KeyboardInterrupt("power cut")
    monkeypatch.setattr(serialization, "_write_zip", crash)
    with pytest.raises(KeyboardInterrupt):
        mp.save({"step": 2}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.mp"]
    monkeypatch.undo()
    assert mp.load(path) == {"step": 1}
    mp.save({"step": 2}, path)
    assert mp.load(path) == {"step": 2} and os.listdir(tmp_path) == ["ckpt.mp"]


def test_training_state_round_trip(tmp_path):
    model = mp.nn.Sequential(mp.nn.Linear(3, 4), mp.nn.BatchNorm1d(4), mp.nn.Linear(4, 2))
    opt = mp.optim.Adam(model.parameters(), lr=0.01, amsgrad=True)
    sched = mp.optim.lr_scheduler.StepLR(opt, 2)
    scaler = mp.GradScaler("cpu", init_scale=1024.0)
    for _ in range(3):
        scaler.scale((model(mp.randn(8, 3)) ** 2).mean()).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict(),
             "scheduler": sched.state_dict(), "rng": mp.get_rng_state()}
    mp.save(state, tmp_path / "s.mp")
    back = mp.load(tmp_path / "s.mp")
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert set(back["optimizer"]["state"]) == set(state["optimizer"]["state"])  # int keys survive
    assert back["optimizer"]["state"][0]["step"] == 3
    assert back["optimizer"]["state"][0]["exp_avg"].dtype == mp.float32
    assert back["scaler"] == state["scaler"] and back["scheduler"] == state["scheduler"]
    assert back["rng"] == state["rng"]
    for k, v in state["model"].items():
        assert bits(back["model"][k]) == bits(v)


def test_a_tensor_updated_by_another_thread_while_saving_is_saved_as_one_consistent_value(tmp_path):
    """save() snapshots each tensor and hashes and writes that snapshot: every file loads and matches its
    checksums. A small tensor's update and its copy are each far shorter than a switch between threads, so each
    small tensor saved holds a single value; a large one is filled outside the GIL (NumPy releases it), so its
    elements may come from successive fills (as with torch.save; writers that must not interleave with a save
    need a lock), but each is a value written."""
    small = [mp.nn.Parameter(mp.zeros(64)) for _ in range(8)]
    big = mp.nn.Parameter(mp.zeros(200_000))
    stop, last = threading.Event(), [0]

    def writer():
        v = 0
        while not stop.is_set():
            v += 1
            last[0] = v  # announced before it is written: no saved value exceeds it
            for p in small + [big]:
                p.data.fill_(v)  # in place, as an optimizer step does
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for i in range(60):
            target = io.BytesIO() if i % 2 else tmp_path / f"ck{i}.mp"
            mp.save({"small": small, "big": big}, target)
            if i % 2:
                target.seek(0)
            back = mp.load(target)  # raises CheckpointError if a buffer's bytes differ from its checksum
            for t in back["small"]:
                a = t.numpy()
                assert (a == a[0]).all(), f"save {i}: a small tensor holds values of several updates"
            a = back["big"].numpy()
            assert (a == np.round(a)).all() and 0 <= a.min() and a.max() <= last[0]
    finally:
        stop.set()
        thread.join()
    assert last[0] > 0  # the writer did run during the saves


def test_a_text_mode_file_or_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="mp.save: the file object is open in text mode"):
        mp.save({"w": mp.ones(2)}, io.StringIO())
    target = tmp_path / "missing" / "ck.mp"
    with pytest.raises(FileNotFoundError, match="mp.save: cannot create the checkpoint in") as info:
        mp.save({"w": mp.ones(2)}, target)
    assert info.value.filename == str(target)  # the file asked for, not the temporary one next to it


@pytest.mark.parametrize("weights_only", [True, False, None])
def test_load_accepts_torchs_weights_only(tmp_path, weights_only):
    """torch.load(f, weights_only=True) ports as is: a mixprec checkpoint is never unpickled either way."""
    path = tmp_path / "w.mp"
    mp.save({"w": mp.arange(3.0)}, path)
    back = mp.load(path, map_location="cpu", weights_only=weights_only)
    np.testing.assert_array_equal(back["w"].numpy(), [0.0, 1.0, 2.0])


def test_load_refuses_a_weights_only_that_is_not_a_flag(tmp_path):
    path = tmp_path / "w.mp"
    mp.save({"w": mp.arange(3.0)}, path)
    with pytest.raises(TypeError, match="mp.load: weights_only must be True, False or None, got 'yes'"):
        mp.load(path, weights_only="yes")
