"""Checkpoints: mp.save(obj, f) and mp.load(f, map_location=None), without pickle.

A checkpoint holds nested dicts, lists and tuples of tensors, arrays and plain
Python values: a model's state_dict, an optimizer's, a GradScaler's and a step
counter, all in one file. Loading reads JSON and raw numbers only, so opening
an untrusted file can never run code.

Format (version 1). The file is a ZIP archive (stored, not compressed), so
``unzip -l ckpt.mp`` shows what is inside:

    manifest.json   {"format": "mixprec-checkpoint", "version": 1,
                     "root": <node>, "buffers": [{"nbytes": n, "sha256": hex}, ...]}
    buffers/0       raw bytes of buffer 0: little-endian, C order
    buffers/1       ...

A node is a JSON object tagged by "t":
    {"t": "none"} | {"t": "bool", "v": true} | {"t": "int", "v": 3}
    {"t": "float", "v": "0.001"}        repr() of the float: exact, and "inf"/"nan" survive
    {"t": "str", "v": "..."}            {"t": "bytes", "buffer": i}
    {"t": "list", "items": [node, ...]}  {"t": "tuple", "items": [...]}
    {"t": "dict", "items": [[key node, value node], ...]}   keys: str, int, float, bool or None
    {"t": "tensor", "buffer": i, "dtype": "bfloat16", "shape": [2, 3], "device": "cpu",
     "requires_grad": false, "parameter": false}
    {"t": "ndarray", "buffer": i, "dtype": "float16", "shape": [...]}     a NumPy array
    {"t": "scalar", "buffer": i, "dtype": "float32"}                        a NumPy scalar
A tensor that appears twice (tied weights) is stored once and loads as one object.
The dtype is stored by name, so float16 and bfloat16 come back bit for bit.

Integrity: every buffer's size and SHA-256 are checked on load (ZIP adds a
CRC-32 per entry too); a truncated or corrupted file raises CheckpointError
saying what is wrong. Saving to a path is atomic: the archive is written to a
temporary file in the same directory, flushed to disk (fsync) and renamed
over the target with os.replace, so a crash mid-save leaves the previous
checkpoint intact.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import zipfile

import ml_dtypes
import numpy as np

from . import backend as _be

__all__ = ["save", "load", "CheckpointError"]

FORMAT, VERSION = "mixprec-checkpoint", 1
_MANIFEST = "manifest.json"
_DATE = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same object always gives the same bytes

_ARRAY_DTYPES = {np.dtype(n).name: np.dtype(n) for n in
                 ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "complex64", "complex128")}
_ARRAY_DTYPES["bfloat16"] = np.dtype(ml_dtypes.bfloat16)


class CheckpointError(ValueError):
    """The file is not a mixprec checkpoint, or it is truncated or corrupted."""


# ---------------------------------------------------------------- save
def save(obj, f) -> None:
    """Write ``obj`` (nested dicts/lists/tuples of tensors, arrays, numbers, strings, None) to ``f``.

    ``f`` is a path (written atomically) or a binary file object opened for writing.
    """
    buffers = []
    memo = {}
    root = _encode(obj, buffers, memo, "obj")
    manifest = {"format": FORMAT, "version": VERSION, "root": root,
                "buffers": [{"nbytes": int(b.nbytes), "sha256": hashlib.sha256(b).hexdigest()} for b in buffers]}
    if isinstance(f, (str, os.PathLike)):
        _save_atomic(os.fspath(f), manifest, buffers)
    elif hasattr(f, "write"):
        _write_zip(f, manifest, buffers)
    else:
        raise TypeError(f"mp.save: expected a path or a binary file object, got {type(f).__name__}")


def _save_atomic(path, manifest, buffers):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_zip(fh, manifest, buffers)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _write_zip(fh, manifest, buffers):
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(zipfile.ZipInfo(_MANIFEST, _DATE), json.dumps(manifest, separators=(",", ":")))
        for i, b in enumerate(buffers):
            info = zipfile.ZipInfo(f"buffers/{i}", _DATE)
            info.file_size = b.nbytes
            with zf.open(info, "w") as out:
                out.write(b)


def _add_buffer(array, buffers):
    """Append the raw little-endian bytes of a host array; returns its buffer index."""
    a = np.ascontiguousarray(array)
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and sys.byteorder == "big"):
        a = a.byteswap()
    buffers.append(memoryview(a.reshape(-1).view(np.uint8)))
    return len(buffers) - 1


def _dtype_name(dtype, where):
    name = np.dtype(dtype).name
    if name not in _ARRAY_DTYPES:
        raise TypeError(f"mp.save: cannot store an array of dtype {dtype} at {where}; supported dtypes: "
                        f"{', '.join(sorted(_ARRAY_DTYPES))}")
    return name


def _encode(obj, buffers, memo, where):
    from .nn.parameter import Parameter
    from .tensor import Tensor
    if obj is None:
        return {"t": "none"}
    if isinstance(obj, bool):
        return {"t": "bool", "v": obj}
    if isinstance(obj, int):
        return {"t": "int", "v": int(obj)}
    if isinstance(obj, float):
        return {"t": "float", "v": repr(float(obj))}
    if isinstance(obj, str):
        return {"t": "str", "v": obj}
    if isinstance(obj, (bytes, bytearray)):
        return {"t": "bytes", "buffer": _add_buffer(np.frombuffer(bytes(obj), dtype=np.uint8), buffers)}
    if isinstance(obj, Tensor):
        if id(obj) in memo:
            return memo[id(obj)][0]
        node = {"t": "tensor", "dtype": _dtype_name(obj.dtype, where), "shape": list(obj.shape),
                "device": str(obj.device), "requires_grad": bool(obj.requires_grad),
                "parameter": isinstance(obj, Parameter),
                "buffer": _add_buffer(_be.to_device(obj.data, _be.CPU), buffers)}
        memo[id(obj)] = (node, obj)  # keep obj alive so its id stays unique while saving
        return node
    if _be.is_array(obj):
        return {"t": "ndarray", "dtype": _dtype_name(obj.dtype, where), "shape": list(obj.shape),
                "buffer": _add_buffer(_be.to_device(obj, _be.CPU), buffers)}
    if isinstance(obj, np.generic):
        return {"t": "scalar", "dtype": _dtype_name(obj.dtype, where), "buffer": _add_buffer(np.asarray(obj), buffers)}
    if isinstance(obj, (list, tuple)):
        kind = "tuple" if isinstance(obj, tuple) else "list"
        if kind == "tuple" and type(obj) is not tuple:
            raise TypeError(f"mp.save: cannot store a {type(obj).__name__} (a named tuple) at {where}; "
                            "convert it to a plain tuple or a dict")
        return {"t": kind, "items": [_encode(x, buffers, memo, f"{where}[{i}]") for i, x in enumerate(obj)]}
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not (k is None or isinstance(k, (str, int, float))):
                raise TypeError(f"mp.save: dict key {k!r} at {where} is a {type(k).__name__}; keys must be "
                                "str, int, float, bool or None")
            items.append([_encode(k, buffers, memo, where), _encode(v, buffers, memo, f"{where}[{k!r}]")])
        return {"t": "dict", "items": items}
    raise TypeError(f"mp.save: cannot store a {type(obj).__name__} at {where}; checkpoints hold tensors, arrays, "
                    "numbers, strings, bytes, None, and lists/tuples/dicts of them (save an object's "
                    "state_dict(), not the object)")


# ---------------------------------------------------------------- load
def load(f, map_location=None):
    """Read a checkpoint written by mp.save.

    map_location: None puts every tensor back on the device it was saved from
    (a CUDA tensor needs a GPU, else pass map_location="cpu"); a device ("cpu",
    "cuda:0") puts them all there; a dict {"cuda:1": "cuda:0"} renames devices.
    NumPy arrays and scalars always load as NumPy.
    """
    name = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<file object>")
    try:
        zf = zipfile.ZipFile(f if hasattr(f, "read") else os.fspath(f), "r")
    except zipfile.BadZipFile:
        raise CheckpointError(f"{name} is not a mixprec checkpoint, or it is truncated (no valid ZIP directory "
                              "at its end)") from None
    with zf:
        try:
            manifest = json.loads(zf.read(_MANIFEST).decode("utf-8"))
        except KeyError:
            raise CheckpointError(f"{name} is a ZIP file but not a mixprec checkpoint (no {_MANIFEST})") from None
        except (zipfile.BadZipFile, ValueError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{name}: the manifest is corrupted ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise CheckpointError(f"{name} is not a mixprec checkpoint (manifest format {manifest.get('format')!r})"
                                  if isinstance(manifest, dict) else f"{name}: the manifest is not an object")
        if manifest.get("version") != VERSION:
            raise CheckpointError(f"{name} is checkpoint format version {manifest.get('version')!r}; this mixprec "
                                  f"reads version {VERSION}")
        reader = _Reader(zf, manifest, name, _device_mapper(map_location))
        try:
            return reader.decode(manifest["root"])
        except (KeyError, TypeError, IndexError) as exc:
            raise CheckpointError(f"{name}: the manifest is malformed ({type(exc).__name__}: {exc})") from None


def _device_mapper(map_location):
    if map_location is None:
        return lambda dev: _be.as_device(dev)
    if isinstance(map_location, dict):
        table = {str(k): v for k, v in map_location.items()}
        return lambda dev: _be.as_device(table.get(dev, dev))
    if isinstance(map_location, (str, _be.Device)):
        target = _be.as_device(map_location)
        return lambda dev: target
    raise TypeError(f"map_location must be None, a device, or a dict of devices, got {type(map_location).__name__}")


class _Reader:
    def __init__(self, zf, manifest, name, device_of):
        self.zf, self.name, self.device_of = zf, name, device_of
        self.meta = manifest["buffers"]
        self.tensors = {}

    def raw(self, i):
        meta = self.meta[i]
        try:
            data = self.zf.read(f"buffers/{i}")
        except KeyError:
            raise CheckpointError(f"{self.name}: buffer {i} is missing (truncated file?)") from None
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise CheckpointError(f"{self.name}: buffer {i} is corrupted or truncated ({exc})") from None
        if len(data) != meta["nbytes"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
            raise CheckpointError(f"{self.name}: buffer {i} is corrupted (its size or SHA-256 does not match "
                                  "the manifest)")
        return data

    def array(self, node):
        dtype = _ARRAY_DTYPES.get(node["dtype"])
        if dtype is None:
            raise CheckpointError(f"{self.name}: unknown dtype {node['dtype']!r} in the manifest")
        shape = tuple(int(n) for n in node.get("shape", ()))
        data = self.raw(node["buffer"])
        if len(data) != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
            raise CheckpointError(f"{self.name}: buffer {node['buffer']} holds {len(data)} bytes, which does not "
                                  f"fit shape {shape} of {dtype.name}")
        array = np.frombuffer(data, dtype=dtype).reshape(shape)
        return array.byteswap() if sys.byteorder == "big" else array.copy()

    def decode(self, node):
        t = node["t"]
        if t == "none":
            return None
        if t in ("bool", "int", "str"):
            v = node["v"]
            if type(v) is not {"bool": bool, "int": int, "str": str}[t]:
                raise CheckpointError(f"{self.name}: a {t} node holds {v!r}")
            return v
        if t == "float":
            return float(node["v"])
        if t == "bytes":
            return self.raw(node["buffer"])
        if t == "list":
            return [self.decode(x) for x in node["items"]]
        if t == "tuple":
            return tuple(self.decode(x) for x in node["items"])
        if t == "dict":
            return {self.decode(k): self.decode(v) for k, v in node["items"]}
        if t == "ndarray":
            return self.array(node)
        if t == "scalar":
            return self.array(node)[()]
        if t == "tensor":
            return self.tensor(node)
        raise CheckpointError(f"{self.name}: unknown node type {t!r} in the manifest")

    def tensor(self, node):
        key = node["buffer"]
        if key in self.tensors:
            return self.tensors[key]
        from . import dtypes as _dt
        from .tensor import Tensor
        array = self.array(node)
        _dt.as_dtype(array.dtype)
        try:
            device = self.device_of(node["device"])
        except _be.DeviceUnavailableError as exc:
            raise _be.DeviceUnavailableError(f"{self.name}: a tensor was saved on {node['device']}, which is not "
                                             f"available here ({exc}); pass map_location='cpu'") from None
        array = _be.to_device(array, device)
        if node.get("parameter"):
            from .nn.parameter import Parameter
            out = Parameter(array, requires_grad=bool(node.get("requires_grad")))
        else:
            out = Tensor._wrap(array)
            out.requires_grad = bool(node.get("requires_grad")) and _dt.is_floating(array.dtype)
        self.tensors[key] = out
        return out

