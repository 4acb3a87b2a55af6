"""mp.load against hostile files: every malformed checkpoint raises CheckpointError, nothing inflates.

A fault campaign corrupts a small real checkpoint at every byte and truncates it at every length;
crafted files attack each check (sizes, compression, shapes, dtypes, nesting, floats, dict entries,
buffer sharing). The save side: cycles, depth, NaN payloads, NumPy scalars, file modes, symlinks.
"""
import collections
import functools
import hashlib
import io
import json
import os
import pickle
import re
import stat
import struct
import threading
import tracemalloc
import warnings
import zipfile

import ml_dtypes
import numpy as np
import pytest

import mixprec as mp
from mixprec import serialization
from mixprec.serialization import MAX_DEPTH, MAX_NDIM, CheckpointError


def fingerprint(x, seen):
    """Everything a loaded value is: types, dtypes, shapes, exact bits, and which tensors are one object."""
    if isinstance(x, mp.Tensor):
        if id(x) in seen:
            return ("same tensor", seen[id(x)])
        seen[id(x)] = len(seen)
        return (type(x).__name__, x.dtype.name, x.shape, x.requires_grad, str(x.device), x.numpy().tobytes())
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.name, x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return (type(x).__name__, x.tobytes())
    if isinstance(x, float):
        return ("float", struct.pack(">d", x))
    if isinstance(x, dict):
        return ("dict", [(fingerprint(k, seen), fingerprint(v, seen)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [fingerprint(v, seen) for v in x])
    return (type(x).__name__, x)


def small_checkpoint():
    """One of every node type, tied tensors included, in about 2 KB."""
    w = mp.nn.Parameter(mp.randn(3))
    obj = {"w": w, "tied": w, "h": mp.ones(2, dtype=mp.bfloat16), "i": mp.tensor([1, 2]),
           "a": np.arange(3, dtype=np.int16), "s": np.float64(0.1),
           1: [0.5, float("nan"), None, True, "x", b"\x01", (2,)]}
    buf = io.BytesIO()
    mp.save(obj, buf)
    return buf.getvalue()


def test_every_flipped_byte_and_every_truncation_errors_cleanly_or_loads_identical_data():
    data = small_checkpoint()
    reference = fingerprint(mp.load(io.BytesIO(data)), {})
    variants = [data[:p] + bytes([data[p] ^ mask]) + data[p + 1:] for p in range(len(data))
                for mask in (0x01, 0x80, 0xFF)]
    variants += [data[:n] for n in range(len(data))]
    outcomes, strays = collections.Counter(), []
    for bad in variants:
        try:
            same = fingerprint(mp.load(io.BytesIO(bad)), {}) == reference
            outcomes["identical" if same else "different data"] += 1
        except CheckpointError:
            outcomes["CheckpointError"] += 1
        except Exception as exc:  # any other type is a failure: count it, show it
            outcomes[type(exc).__name__] += 1
            strays.append(repr(exc))
    assert sum(outcomes.values()) == 4 * len(data)
    assert outcomes["CheckpointError"] > 0.8 * len(variants)  # the campaign does hit the checks
    assert set(outcomes) <= {"identical", "CheckpointError"}, (outcomes, strays[:5])


# ---------------------------------------------------------------- crafted files
def manifest_for(root, payloads=(), **fields):
    """A well-formed manifest for ``root`` over ``payloads``; ``fields`` replace or add top-level keys."""
    table = [{"nbytes": len(b), "sha256": hashlib.sha256(b).hexdigest()} for b in payloads]
    return {"format": "mixprec-checkpoint", "version": 1, "root": root, "buffers": table} | fields


def archive(manifest, buffers=()):
    """The bytes of a ZIP holding this manifest (a dict, or raw text) and buffers/<i>."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("manifest.json", manifest if isinstance(manifest, str) else json.dumps(manifest))
        for i, b in enumerate(buffers):
            zf.writestr(f"buffers/{i}", b)
    return out.getvalue()


def checkpoint(root, buffers=()):
    return archive(manifest_for(root, buffers), buffers)


def patch_directory(data, name, **fields):
    """Overwrite fields of ``name``'s record in the ZIP's central directory (its table of contents)."""
    layout = {"flags": (8, "<H"), "method": (10, "<H"), "compress_size": (20, "<I"), "file_size": (24, "<I")}
    data = bytearray(data)
    record = data.find(b"PK\x01\x02")
    while data[record + 46:record + 46 + len(name)] != name.encode():
        record = data.find(b"PK\x01\x02", record + 1)
    for field, value in fields.items():
        offset, fmt = layout[field]
        struct.pack_into(fmt, data, record + offset, value)
    return bytes(data)


def load_error(data, tmp_path):
    path = tmp_path / "hostile.mp"
    path.write_bytes(data)
    with pytest.raises(CheckpointError) as info:
        mp.load(path)
    assert info.value.path == str(path) and str(info.value).startswith(f"{path}: ")
    return info.value.problem


def load_error_and_peak_memory(data, tmp_path):
    """What load_error returns, and the most memory Python allocated meanwhile."""
    tracemalloc.start()
    try:
        return load_error(data, tmp_path), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@functools.lru_cache(maxsize=None)
def deflated_bomb():
    """A 16-byte buffer whose entry inflates to 64 MiB: a 64 KB file."""
    out = io.BytesIO()
    table = [{"nbytes": 16, "sha256": hashlib.sha256(bytes(16)).hexdigest()}]
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("manifest.json", json.dumps({"format": "mixprec-checkpoint", "version": 1,
                                                 "root": {"t": "bytes", "buffer": 0}, "buffers": table}))
        zf.writestr("buffers/0", bytes(64 << 20), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return out.getvalue()


@pytest.mark.parametrize("declared", [None, 16], ids=["honest-size", "claims-16-bytes"])
def test_a_zip_bomb_fails_before_inflating(tmp_path, declared):
    data = deflated_bomb() if declared is None else patch_directory(deflated_bomb(), "buffers/0", file_size=declared)
    assert len(data) < 70_000
    problem, peak = load_error_and_peak_memory(data, tmp_path)
    assert "compressed" in problem and peak < 1 << 20  # 64 MiB if it had inflated


@pytest.mark.parametrize("fields, message", [
    (dict(file_size=1 << 31), "declares 16 stored bytes but 2147483648 uncompressed"),
    (dict(file_size=1 << 31, compress_size=1 << 31), "more than the file's"),
    (dict(flags=1), "encrypted"),
    (dict(method=12), r"compressed \(method 12\)"),
])
def test_entry_sizes_and_methods_are_checked_before_reading(tmp_path, fields, message):
    data = patch_directory(checkpoint({"t": "bytes", "buffer": 0}, [bytes(16)]), "buffers/0", **fields)
    problem, peak = load_error_and_peak_memory(data, tmp_path)
    assert re.search(message, problem) and peak < 1 << 20


def test_the_archive_holds_exactly_the_entries_the_manifest_implies(tmp_path):
    manifest = json.dumps(manifest_for({"t": "bytes", "buffer": 0}, [b"ab"]))

    def entries(*names):
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as zf, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns about a duplicate name, and writes it
            for name in names:
                zf.writestr(name, manifest if name == "manifest.json" else b"ab")
        return out.getvalue()
    assert "appears twice" in load_error(entries("manifest.json", "buffers/0", "buffers/0"), tmp_path)
    assert "unexpected entry 'evil.py'" in load_error(entries("manifest.json", "buffers/0", "evil.py"), tmp_path)
    assert "unexpected entry 'buffers/00'" in load_error(entries("manifest.json", "buffers/00"), tmp_path)
    assert "lacks ['buffers/0']" in load_error(entries("manifest.json"), tmp_path)
    assert "also holds ['buffers/1']" in load_error(entries("manifest.json", "buffers/0", "buffers/1"), tmp_path)


def nested(depth):
    node = {"t": "none"}
    for _ in range(depth):
        node = {"t": "list", "items": [node]}
    return node


F32 = np.arange(4, dtype=np.float32).tobytes()
SHA = hashlib.sha256(b"").hexdigest()


def case(root, payloads=(), **fields):
    return manifest_for(root, payloads, **fields), payloads


def array(t="ndarray", dtype="float32", shape=(4,), **fields):
    return {"t": t, "buffer": 0, "dtype": dtype, "shape": list(shape)} | fields


def tensor(**fields):
    return array("tensor", **{"device": "cpu"} | fields)


NONE = {"t": "none"}
HOSTILE_MANIFESTS = {  # name: ((manifest, buffers), what the error must say)
    # the manifest itself
    "not json": (("{not json", ()), "manifest is corrupted"),
    "json array": (("[1, 2]", ()), "not an object"),
    "json nested 100000 deep": (('{"format": "mixprec-checkpoint", "root": ' + "[" * 100_000, ()), "corrupted"),
    "no buffers": (({"format": "mixprec-checkpoint", "version": 1, "root": NONE}, ()), "no 'buffers'"),
    "no root": (({"format": "mixprec-checkpoint", "version": 1, "buffers": []}, ()), "no 'root'"),
    "version true": (case(NONE, version=True), "version True"),
    "version 2": (case(NONE, version=2), "version 2"),
    "buffers not a list": (case(NONE, buffers={"0": 1}), "expected a list"),
    "negative nbytes": (case(NONE, [b""], buffers=[{"nbytes": -1, "sha256": SHA}]), "nbytes"),
    "bool nbytes": (case(NONE, [b"a"], buffers=[{"nbytes": True, "sha256": SHA}]), "nbytes"),
    "bad sha": (case(NONE, [b""], buffers=[{"nbytes": 0, "sha256": "x"}]), "64 hex digits"),
    "table lies about size": (case(NONE, [b""], buffers=[{"nbytes": 3, "sha256": SHA}]),
                              "archive holds 0 bytes, the manifest says 3"),
    "sha mismatch": (case({"t": "bytes", "buffer": 0}, [b""], buffers=[{"nbytes": 0, "sha256": "0" * 64}]),
                     "SHA-256 does not match"),
    # nodes
    "node not an object": (case([1]), "expected a node"),
    "t not a string": (case({"t": 3}), "expected a node"),
    "unknown node": (case({"t": "pickle"}), "unknown node type 'pickle'"),
    "int holds a bool": (case({"t": "int", "v": True}), "'v' must be an int"),
    "int holds a string": (case({"t": "int", "v": "12"}), "'v' must be an int"),
    "str holds a number": (case({"t": "str", "v": 1}), "'v' must be a string"),
    "list without items": (case({"t": "list"}), "'items' must be a list, got nothing"),
    "too deep": (case(nested(MAX_DEPTH + 1)), f"nested more than {MAX_DEPTH} deep"),
    # floats
    "float not a string": (case({"t": "float", "v": 0.5}), "'v' must be a string"),
    "float garbage": (case({"t": "float", "v": "abc"}), "not a float as repr"),
    "float underscores": (case({"t": "float", "v": "1_0"}), "not a float as repr"),
    "float spaces": (case({"t": "float", "v": " 1.5"}), "not a float as repr"),
    "float non-canonical": (case({"t": "float", "v": "1e5"}), "not a float as repr"),
    "bits of a non-NaN": (case({"t": "float", "v": "nan", "bits": "3ff0000000000000"}), "must be a NaN"),
    "bits with a number": (case({"t": "float", "v": "1.0", "bits": "7ff8000000000000"}), "must be a NaN"),
    "bits not hex": (case({"t": "float", "v": "nan", "bits": "zz"}), "must be a NaN"),
    # dict entries
    "3-item dict entry": (case({"t": "dict", "items": [[NONE] * 3]}), r"\[key node, value node\]"),
    "dict entry not a list": (case({"t": "dict", "items": [NONE]}), "pair"),
    "list as dict key": (case({"t": "dict", "items": [[{"t": "list", "items": []}, NONE]]}), "dict key must be"),
    "duplicate key": (case({"t": "dict", "items": [[{"t": "int", "v": 1}, NONE], [{"t": "float", "v": "1.0"}, NONE]]}),
                      "key 1.0 twice"),
    # dtypes and shapes
    "unknown dtype": (case(array(dtype="object", shape=[0]), [b""]), "unknown dtype 'object'"),
    "dtype not a string": (case(array(dtype=["f4"], shape=[0]), [b""]), "unknown dtype"),
    "uint16 tensor": (case(tensor(dtype="uint16", shape=[0]), [b""]), "unknown dtype 'uint16' for a tensor"),
    "negative dims": (case(array(shape=[-1, -4]), [F32]), "non-negative ints"),
    "dim 2**63": (case(array(dtype="uint8", shape=[2 ** 63, 0]), [b""]), "larger than any array"),
    "int64 product overflow": (case(array(dtype="uint8", shape=[2 ** 32, 2 ** 32]), [b""]), "larger than any array"),
    "float dim": (case(array(shape=[4.0]), [F32]), "non-negative ints"),
    "bool dim": (case(array(shape=[True, 4]), [F32]), "non-negative ints"),
    "too many dims": (case(array(dtype="uint8", shape=[1] * (MAX_NDIM + 1)), [b"a"]), f"at most {MAX_NDIM}"),
    "shape not a list": (case(array() | {"shape": 4}, [F32]), "non-negative ints"),
    "shape too small": (case(array(shape=[3]), [F32]), "does not fit shape"),
    "scalar of 4 floats": (case({"t": "scalar", "buffer": 0, "dtype": "float32"}, [F32]), "does not fit"),
    # buffers
    "buffer index out of range": (case({"t": "bytes", "buffer": 1}, [b""]), "index below 1"),
    "buffer index true": (case({"t": "bytes", "buffer": True}, [b"", b""]), "'buffer' is True"),
    "buffer index negative": (case({"t": "bytes", "buffer": -1}, [b""]), "index below"),
    "one buffer read twice": (case({"t": "list", "items": [{"t": "bytes", "buffer": 0}] * 2}, [F32]),
                              r"also used by root\[0\]"),
    "tied tensors that differ": (case({"t": "list", "items": [tensor(), tensor(dtype="int32")]}, [F32]), "differs"),
    "tensor and array share": (case({"t": "list", "items": [tensor(), array()]}, [F32]), "also used by"),
    # tensors
    "bad device": (case(tensor(device="tpu"), [F32]), "unknown device 'tpu'"),
    "device not a string": (case(tensor(device=0), [F32]), "'device' must be a string"),
    "int tensor requires grad": (case(tensor(dtype="int32", requires_grad=True), [F32]), "cannot require grad"),
    "requires_grad not a bool": (case(tensor(requires_grad="yes"), [F32]), "must be a bool"),
    "parameter not a bool": (case(tensor(parameter=1), [F32]), "must be a bool"),
}


@pytest.mark.parametrize("name", list(HOSTILE_MANIFESTS))
def test_a_crafted_manifest_raises_checkpoint_error_naming_the_problem(tmp_path, name):
    (manifest, buffers), message = HOSTILE_MANIFESTS[name]
    assert re.search(message, load_error(archive(manifest, buffers), tmp_path))


def test_nesting_up_to_the_limit_loads_and_saves(tmp_path):
    assert mp.load(io.BytesIO(checkpoint(nested(MAX_DEPTH)))) is not None
    obj = None
    for _ in range(MAX_DEPTH):
        obj = [obj]
    mp.save(obj, tmp_path / "deep.mp")
    assert mp.load(tmp_path / "deep.mp") == obj
    with pytest.raises(ValueError, match=f"nested more than {MAX_DEPTH}"):
        mp.save([obj], tmp_path / "deeper.mp")


def test_old_files_without_optional_fields_still_load():
    """Version-1 files written before NaN bits existed: 'nan' loads as NaN; optional tensor flags default off."""
    data = checkpoint({"t": "list", "items": [{"t": "float", "v": "nan"},
                                              {"t": "tensor", "buffer": 0, "dtype": "float32", "shape": [4],
                                               "device": "cpu"}]}, [F32])
    nan, t = mp.load(io.BytesIO(data))
    assert nan != nan and not t.requires_grad and t.numpy().tobytes() == F32


def test_missing_files_and_wrong_arguments_are_not_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        mp.load(tmp_path / "absent.mp")
    with pytest.raises(TypeError, match="path or a binary file object"):
        mp.load(3)
    assert mp.CheckpointError is CheckpointError and issubclass(CheckpointError, ValueError)
    exc = CheckpointError("a.mp", "buffer 0 is corrupted")
    assert str(exc) == "a.mp: buffer 0 is corrupted" and exc.path == "a.mp"
    assert str(pickle.loads(pickle.dumps(exc))) == str(exc)  # crosses process boundaries intact


# ---------------------------------------------------------------- saving
def test_a_cycle_is_a_clear_error_and_shared_values_are_fine(tmp_path):
    a = [1]
    a.append(a)
    d = {"x": {}}
    d["x"]["back"] = d
    for obj, where in ((a, r"obj\[1\]"), (d, r"obj\['x'\]\['back'\]")):
        with pytest.raises(ValueError, match=where + " contains itself"):
            mp.save(obj, tmp_path / "cycle.mp")
    assert not os.listdir(tmp_path)
    shared = [1, 2]
    mp.save({"a": shared, "b": shared}, tmp_path / "ok.mp")  # a value twice is not a cycle
    assert mp.load(tmp_path / "ok.mp") == {"a": [1, 2], "b": [1, 2]}


def nan_with(bits):
    return struct.unpack(">d", bytes.fromhex(bits))[0]


def test_nan_payloads_and_numpy_scalars_round_trip_exactly(tmp_path):
    nans = [nan_with(b) for b in ("7ff8000000000000", "fff8000000000000", "7ff800000000dead", "fff0000000000001")]
    scalars = [np.float64(0.1), np.float64(nan_with("fff800000000beef")), np.float32(-0.0), np.float16(65504),
               ml_dtypes.bfloat16(1.5), np.int64(-(2 ** 63)), np.uint64(2 ** 64 - 1), np.int8(-1), np.bool_(True),
               np.complex128(1 - 2j)]
    obj = {"nans": nans, "scalars": scalars, nans[2]: "a NaN key"}
    mp.save(obj, tmp_path / "n.mp")
    back = mp.load(tmp_path / "n.mp")
    assert [struct.pack(">d", x) for x in back["nans"]] == [struct.pack(">d", x) for x in nans]
    for got, want in zip(back["scalars"], scalars):
        assert type(got) is type(want) and got.tobytes() == want.tobytes()
    (key,) = [k for k in back if isinstance(k, float)]
    assert struct.pack(">d", key) == struct.pack(">d", nans[2])


@pytest.fixture
def umask():
    def set_umask(mask):
        os.umask(mask)
    old = os.umask(0o022)
    yield set_umask
    os.umask(old)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_umask_mode(tmp_path, umask, mask, mode):
    umask(mask)
    mp.save({"step": 1}, tmp_path / "new.mp")
    assert os.stat(tmp_path / "new.mp").st_mode & 0o7777 == mode
    with open(tmp_path / "reference", "wb"):  # what any other file the process creates gets
        pass
    assert os.stat(tmp_path / "reference").st_mode & 0o7777 == mode


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o604])
def test_overwriting_keeps_the_existing_mode(tmp_path, umask, mode):
    umask(0o077)
    path = tmp_path / "ck.mp"
    mp.save({"step": 1}, path)
    os.chmod(path, mode)
    mp.save({"step": 2}, path)
    assert os.stat(path).st_mode & 0o7777 == mode and mp.load(path) == {"step": 2}


def test_saving_onto_a_symlink_writes_through_it(tmp_path):
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "ckpt-100.mp"
    mp.save({"step": 100}, target)
    os.chmod(target, 0o640)
    link = tmp_path / "latest.mp"
    link.symlink_to(os.path.join("runs", "ckpt-100.mp"))  # relative, as `ln -s` makes them
    mp.save({"step": 101}, link)
    assert link.is_symlink() and os.readlink(link) == os.path.join("runs", "ckpt-100.mp")
    assert mp.load(target) == {"step": 101} and os.stat(target).st_mode & 0o777 == 0o640
    assert sorted(os.listdir(tmp_path / "runs")) == ["ckpt-100.mp"]  # no temporary file left behind
    dangling = tmp_path / "next.mp"
    dangling.symlink_to(tmp_path / "runs" / "ckpt-200.mp")
    mp.save({"step": 200}, dangling)  # creates the target, as open(path, "wb") would
    assert dangling.is_symlink() and mp.load(tmp_path / "runs" / "ckpt-200.mp") == {"step": 200}
    loop = tmp_path / "loop.mp"
    loop.symlink_to(loop)
    with pytest.raises(OSError, match="symlink loop"):
        mp.save({"step": 0}, loop)
    assert loop.is_symlink()


def test_a_pipe_or_device_is_written_into_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    mp.save({"w": mp.ones(3)}, fifo)
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]
    assert mp.load(io.BytesIO(received[0]))["w"].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(IsADirectoryError):
        mp.save({"step": 1}, tmp_path)


def disk_full(fh, manifest, buffers):
    fh.write(b"PK partial")
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("failure", ["write", "fsync", "replace"])
def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch, failure):
    (tmp_path / "real.mp").write_bytes(b"")
    link = tmp_path / "link.mp"
    link.symlink_to("real.mp")
    mp.save({"step": 1}, link)
    before = (tmp_path / "real.mp").read_bytes()
    if failure == "write":
        monkeypatch.setattr(serialization, "_write_zip", disk_full)
    else:
        def broken(*args):
            raise OSError(5, f"{failure} failed")
        monkeypatch.setattr(os, failure, broken)
    with pytest.raises(OSError):
        mp.save({"step": 2}, link)
    monkeypatch.undo()
    assert (tmp_path / "real.mp").read_bytes() == before and link.is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["link.mp", "real.mp"] and mp.load(link) == {"step": 1}
