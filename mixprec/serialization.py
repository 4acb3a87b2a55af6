"""Checkpoints: mp.save(obj, f) and mp.load(f, map_location=None), without pickle.

A checkpoint holds nested dicts, lists and tuples of tensors, arrays and plain
Python values: a model's state_dict, an optimizer's, a GradScaler's and a step
counter, all in one file. Loading reads JSON and raw numbers only, so opening
an untrusted file can never run code.

Format (version 1). The file is a ZIP archive whose entries are stored, not
compressed, so ``unzip -l ckpt.mp`` shows what is inside:

    manifest.json   {"format": "mixprec-checkpoint", "version": 1,
                     "root": <node>, "buffers": [{"nbytes": n, "sha256": hex}, ...]}
    buffers/0       raw bytes of buffer 0: little-endian, C order
    buffers/1       ...

A node is a JSON object tagged by "t":
    {"t": "none"} | {"t": "bool", "v": true} | {"t": "int", "v": 3}
    {"t": "float", "v": "0.001"}        repr() of the float: exact, and "inf" survives
    {"t": "float", "v": "nan", "bits": "7ff8000000000001"}   a NaN keeps its 64 bits (sign and payload)
    {"t": "str", "v": "..."}            {"t": "bytes", "buffer": i}
    {"t": "list", "items": [node, ...]}  {"t": "tuple", "items": [...]}
    {"t": "dict", "items": [[key node, value node], ...]}   keys: str, int, float, bool or None
    {"t": "tensor", "buffer": i, "dtype": "bfloat16", "shape": [2, 3], "device": "cpu",
     "requires_grad": false, "parameter": false}
    {"t": "ndarray", "buffer": i, "dtype": "float16", "shape": [...]}     a NumPy array
    {"t": "scalar", "buffer": i, "dtype": "float64"}                        a NumPy scalar (np.float64 too)
A tensor that appears twice (tied weights) is stored once and loads as one object.
The dtype is stored by name, so float16, bfloat16 and the float8 dtypes come back bit for bit.

Loading trusts nothing in the file. Before reading any buffer it checks that
the archive holds exactly manifest.json and buffers/0 .. buffers/n-1, each
stored uncompressed, unencrypted, with the size the manifest declares, and
that all entries together fit in the file: a file of N bytes never makes the
loader read or allocate more than about N bytes (no ZIP bomb). Each node is
checked as it is decoded: its type and fields, a known dtype, a shape of at
most MAX_NDIM non-negative ints whose size matches its buffer exactly, one
node per buffer (tied tensors: identical nodes), unique dict keys, at most
MAX_DEPTH lists/tuples/dicts nested in each other. Every buffer is checked
against its CRC-32 (ZIP) and SHA-256 (manifest). Whatever is wrong, a
malformed, truncated or corrupted file raises CheckpointError (a ValueError,
also mp.CheckpointError) naming the file and the problem; no other exception
type comes out of a bad file. (A tensor saved on a GPU this machine lacks
raises mp.DeviceUnavailableError: that file is fine, pass map_location.)

Saving snapshots each tensor: its bytes are copied, and the copy is hashed and
written, so a tensor another thread updates during save() still gives a file
whose buffers match their checksums (each tensor is copied on its own, not all
of them at one instant; see docs/nn.md, "Saving while training").

Saving to a path is atomic: the archive is written to a temporary file in the
target's directory, flushed to disk (fsync) and renamed over the target with
os.replace, so a crash or a failed write leaves the previous checkpoint
intact. The file gets the mode a newly created file gets (0o666 less the
umask) or, when it replaces a file, that file's mode. A symlink is written
through, as torch.save's open() does: its target gets the new data and the
link stays. (Replacing means a new inode: hard links to the old file keep the
old data, and owner and ACLs are the saving process's.) A path that is a pipe
or a device (/dev/null) is written into, never replaced.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import secrets
import stat
import struct
import sys
import zipfile

import ml_dtypes
import numpy as np

from . import backend as _be
from .backend import availability, devices
from . import dtypes as _dt
from .tensor import Tensor
from .nn.parameter import Parameter

__all__ = ["save", "load", "CheckpointError", "MAX_DEPTH", "MAX_NDIM"]

FORMAT, VERSION = "mixprec-checkpoint", 1
MAX_DEPTH = 100  # lists/tuples/dicts nested in each other, on save and on load
MAX_NDIM = 32    # dimensions of one array (NumPy 1.x's limit; NumPy 2 allows 64)
_MANIFEST = "manifest.json"
_BUFFER_NAME = re.compile(r"buffers/(0|[1-9][0-9]*)")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_BITS = re.compile(r"[0-9a-f]{16}")
_DATE = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same object always gives the same bytes
_MAX_BYTES = np.iinfo(np.intp).max  # NumPy's limit on an array's size in bytes

_ARRAY_DTYPES = {np.dtype(n).name: np.dtype(n) for n in
                 ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "complex64", "complex128")}
_ARRAY_DTYPES["bfloat16"] = np.dtype(ml_dtypes.bfloat16)
_ARRAY_DTYPES.update((d.name, d) for d in _dt.FLOAT8)  # stored as their bytes: every bit pattern comes back


class CheckpointError(ValueError):
    """The file is not a mixprec checkpoint, or it is truncated, corrupted or malformed.

    ``path`` is the file (its name, for a file object), ``problem`` what is wrong with it.
    """

    def __init__(self, path, problem):
        super().__init__(path, problem)
        self.path, self.problem = path, problem

    def __str__(self):
        return f"{self.path}: {self.problem}"


# ---------------------------------------------------------------- save
def save(obj, f) -> None:
    """Write ``obj`` (nested dicts/lists/tuples of tensors, arrays, numbers, strings, None) to ``f``.

    ``f`` is a path (written atomically, see the module docstring) or a binary file object opened for writing.
    """
    buffers = []
    root = _encode(obj, buffers, {}, "obj", set())
    manifest = {"format": FORMAT, "version": VERSION, "root": root,
                "buffers": [{"nbytes": int(b.nbytes), "sha256": hashlib.sha256(b).hexdigest()} for b in buffers]}
    if isinstance(f, (str, os.PathLike)):
        _save_to_path(os.fspath(f), manifest, buffers)
    elif isinstance(f, io.TextIOBase):
        raise TypeError("mp.save: the file object is open in text mode; open it in binary mode (\"wb\")")
    elif hasattr(f, "write"):
        _write_zip(f, manifest, buffers)
    else:
        raise TypeError(f"mp.save: expected a path or a binary file object, got {type(f).__name__}")


def _save_to_path(path, manifest, buffers):
    target = _write_through_links(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):  # a pipe or a device (/dev/null): write into it,
        with open(target, "wb") as fh:                    # never replace it (and a directory is an error)
            _write_zip(fh, manifest, buffers)
        return
    # a new file gets the mode the umask gives any new file; replacing a file keeps its mode
    _save_atomic(target, manifest, buffers, None if st is None else stat.S_IMODE(st.st_mode))


def _save_atomic(target, manifest, buffers, mode):
    directory = os.path.dirname(target)
    fd, tmp = _create_temporary(directory, os.path.basename(target))
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            _write_zip(fh, manifest, buffers)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _write_through_links(path):
    """The file a save to ``path`` writes: the final target of a symlink chain (the links stay)."""
    target = os.path.realpath(path)
    if os.path.islink(target):  # realpath stops at a link it cannot resolve: a loop
        raise OSError(f"mp.save: {path} is a symlink loop")
    return target


def _create_temporary(directory, base):
    """A new, empty file next to the target, created with mode 0o666 so the umask applies (as open() would)."""
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:  # (the same error type, naming the file the caller asked for, not the temporary)
            raise type(exc)(exc.errno, f"mp.save: cannot create the checkpoint in {directory!r}: {exc.strerror}",
                            os.path.join(directory, base)) from None
    raise FileExistsError(f"mp.save: could not create a temporary file in {directory}")


def _write_zip(fh, manifest, buffers):
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(zipfile.ZipInfo(_MANIFEST, _DATE), json.dumps(manifest, separators=(",", ":")))
        for i, b in enumerate(buffers):
            info = zipfile.ZipInfo(f"buffers/{i}", _DATE)
            info.file_size = b.nbytes
            with zf.open(info, "w") as out:
                out.write(b)


def _add_buffer(array, buffers):
    """Append a snapshot of an array's raw little-endian bytes; returns its buffer index.

    The bytes are copied first and the copy is what gets hashed and written, so a tensor another thread
    updates while save() runs is stored as one consistent value that matches its checksum.
    """
    if _be.is_cupy_array(array):
        a = np.ascontiguousarray(devices.to_device(array, devices.CPU))  # (a new host array: already a copy)
    else:
        a = np.array(array, order="C", copy=True)
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and sys.byteorder == "big"):
        a = a.byteswap()
    buffers.append(memoryview(a.reshape(-1).view(np.uint8)))
    return len(buffers) - 1


def _array_fields(array, where):
    """dtype and shape of an array to save, checked against what mp.load accepts."""
    name = np.dtype(array.dtype).name
    if name not in _ARRAY_DTYPES:
        raise TypeError(f"mp.save: cannot store an array of dtype {array.dtype} at {where}; supported dtypes: "
                        f"{', '.join(sorted(_ARRAY_DTYPES))}")
    if array.ndim > MAX_NDIM:
        raise ValueError(f"mp.save: the array at {where} has {array.ndim} dimensions; checkpoints hold at most "
                         f"{MAX_NDIM}")
    return {"dtype": name, "shape": list(array.shape)}


def _float_bits(x: float) -> str:
    return struct.pack(">d", x).hex()


def _encode(obj, buffers, memo, where, enclosing):
    """The manifest node for obj; ``enclosing`` holds the ids of the containers obj sits in."""
    if obj is None:
        return {"t": "none"}
    if isinstance(obj, bool):
        return {"t": "bool", "v": obj}
    if isinstance(obj, np.generic) and not isinstance(obj, (str, bytes)):  # before float: np.float64 is a float
        fields = _array_fields(obj, where)
        return {"t": "scalar", "dtype": fields["dtype"], "buffer": _add_buffer(np.asarray(obj), buffers)}
    if isinstance(obj, int):
        return {"t": "int", "v": int(obj)}
    if isinstance(obj, float):
        if obj != obj:
            return {"t": "float", "v": "nan", "bits": _float_bits(obj)}
        return {"t": "float", "v": repr(float(obj))}
    if isinstance(obj, str):
        return {"t": "str", "v": obj}
    if isinstance(obj, (bytes, bytearray)):
        return {"t": "bytes", "buffer": _add_buffer(np.frombuffer(bytes(obj), dtype=np.uint8), buffers)}
    if isinstance(obj, Tensor):
        if id(obj) in memo:
            return memo[id(obj)][0]
        array = obj._array  # read once: its fields and its bytes describe the same array
        node = {"t": "tensor", **_array_fields(array, where), "device": str(obj.device),
                "requires_grad": bool(obj.requires_grad), "parameter": isinstance(obj, Parameter),
                "buffer": _add_buffer(array, buffers)}
        memo[id(obj)] = (node, obj)  # keep obj alive so its id stays unique while saving
        return node
    if _be.is_array(obj):
        return {"t": "ndarray", **_array_fields(obj, where), "buffer": _add_buffer(obj, buffers)}
    if isinstance(obj, (list, tuple, dict)):
        if id(obj) in enclosing:
            raise ValueError(f"mp.save: {where} contains itself (a reference cycle); a checkpoint holds a tree of "
                             "values, so break the cycle first")
        if len(enclosing) >= MAX_DEPTH:
            raise ValueError(f"mp.save: {where} is nested more than {MAX_DEPTH} lists/tuples/dicts deep; "
                             f"checkpoints hold at most {MAX_DEPTH} levels (mp.load refuses deeper files)")
        enclosing.add(id(obj))
        try:
            return _encode_container(obj, buffers, memo, where, enclosing)
        finally:
            enclosing.discard(id(obj))
    raise TypeError(f"mp.save: cannot store a {type(obj).__name__} at {where}; checkpoints hold tensors, arrays, "
                    "numbers, strings, bytes, None, and lists/tuples/dicts of them (save an object's "
                    "state_dict(), not the object)")


def _encode_container(obj, buffers, memo, where, enclosing):
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not (k is None or isinstance(k, (str, int, float))):
                raise TypeError(f"mp.save: dict key {k!r} at {where} is a {type(k).__name__}; keys must be "
                                "str, int, float, bool or None")
            items.append([_encode(k, buffers, memo, where, enclosing),
                          _encode(v, buffers, memo, f"{where}[{k!r}]", enclosing)])
        return {"t": "dict", "items": items}
    if isinstance(obj, tuple) and type(obj) is not tuple:
        raise TypeError(f"mp.save: cannot store a {type(obj).__name__} (a named tuple) at {where}; "
                        "convert it to a plain tuple or a dict")
    return {"t": "tuple" if isinstance(obj, tuple) else "list",
            "items": [_encode(x, buffers, memo, f"{where}[{i}]", enclosing) for i, x in enumerate(obj)]}


# ---------------------------------------------------------------- load
def load(f, map_location=None, *, weights_only=None):
    """Read a checkpoint written by mp.save.

    map_location: None puts every tensor back on the device it was saved from
    (a CUDA tensor needs a GPU, else pass map_location="cpu"); a device ("cpu",
    "cuda:0") puts them all there; a dict {"cuda:1": "cuda:0"} renames devices.
    NumPy arrays and scalars always load as NumPy. A bad file raises CheckpointError.
    weights_only (True, False or None) is accepted for torch.load's callers: a mixprec
    checkpoint is never unpickled, so what it loads is always what weights_only=True allows.
    """
    if weights_only is not None and not isinstance(weights_only, bool):
        raise TypeError(f"mp.load: weights_only must be True, False or None, got {weights_only!r}")
    device_of = _device_mapper(map_location)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:  # a missing or unreadable file is an OSError, as for any open()
            return _load(fh, os.fspath(f), device_of)
    if not hasattr(f, "read"):
        raise TypeError(f"mp.load: expected a path or a binary file object, got {type(f).__name__}")
    return _load(f, getattr(f, "name", "<file object>"), device_of)


# What the zipfile module raises on a damaged archive (beyond BadZipFile): a wild offset gives OSError or
# ValueError, a flipped flag bit RuntimeError ("password required") or NotImplementedError, a short read EOFError.
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError,
               RuntimeError, OverflowError, struct.error)


@contextlib.contextmanager
def _zip_errors(name, what):
    try:
        yield
    except CheckpointError:
        raise
    except _ZIP_ERRORS as exc:
        raise CheckpointError(name, f"{what} ({type(exc).__name__}: {exc})") from None


def _load(fh, name, device_of):
    size = fh.seek(0, os.SEEK_END)
    with _zip_errors(name, "not a mixprec checkpoint, or it is truncated: no valid ZIP directory at its end"):
        zf = zipfile.ZipFile(fh, "r")
    with zf:
        entries = _check_entries(zf, size, name)
        manifest = _read_manifest(zf, entries, name)
        meta = _check_buffer_table(manifest, entries, name)
        return _Reader(zf, entries, meta, name, device_of).decode(manifest["root"], "root", 0)


def _check_entries(zf, size, name):
    """The archive's entries by name, checked so that reading them all reads at most ``size`` bytes."""
    infos = zf.infolist()
    entries = {info.filename: info for info in infos}
    if len(entries) != len(infos):
        raise CheckpointError(name, "an entry name appears twice in the ZIP directory")
    if _MANIFEST not in entries:
        raise CheckpointError(name, f"a ZIP file but not a mixprec checkpoint (no {_MANIFEST})")
    for info in infos:
        what = f"entry {info.filename!r}"
        if info.filename != _MANIFEST and not _BUFFER_NAME.fullmatch(info.filename):
            raise CheckpointError(name, f"unexpected {what}; a checkpoint holds manifest.json and buffers/<i> only")
        if info.compress_type != zipfile.ZIP_STORED:
            raise CheckpointError(name, f"{what} is compressed (method {info.compress_type}); checkpoint entries "
                                        "are stored uncompressed (ZIP_STORED)")
        if info.flag_bits & 0x1:
            raise CheckpointError(name, f"{what} is encrypted")
        if info.compress_size != info.file_size:
            raise CheckpointError(name, f"{what} declares {info.compress_size} stored bytes but {info.file_size} "
                                        "uncompressed bytes; a stored entry has the same number of both")
    total = sum(info.compress_size for info in infos)
    if total > size:
        raise CheckpointError(name, f"its entries declare {total} bytes in all, more than the file's {size} bytes "
                                    "(truncated, or entries that overlap)")
    return entries


def _read_entry(zf, info, name, what):
    """The bytes of a stored entry: exactly its declared size, CRC-checked, never more."""
    with _zip_errors(name, f"{what} is corrupted or truncated"):
        with zf.open(info) as entry:
            data = entry.read(info.file_size)
    if len(data) != info.file_size:
        raise CheckpointError(name, f"{what} is truncated: {len(data)} of {info.file_size} bytes")
    return data


def _read_manifest(zf, entries, name):
    data = _read_entry(zf, entries[_MANIFEST], name, "the manifest")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise CheckpointError(name, f"the manifest is corrupted: not JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(manifest, dict):
        raise CheckpointError(name, f"the manifest is a JSON {type(manifest).__name__}, not an object")
    if manifest.get("format") != FORMAT:
        raise CheckpointError(name, f"not a mixprec checkpoint (manifest format {_show(manifest.get('format'))})")
    version = manifest.get("version")
    if type(version) is not int or version != VERSION:
        raise CheckpointError(name, f"checkpoint format version {_show(version)}; this mixprec reads version "
                                    f"{VERSION}")
    for key in ("root", "buffers"):
        if key not in manifest:
            raise CheckpointError(name, f"the manifest has no {key!r}")
    return manifest


def _check_buffer_table(manifest, entries, name):
    """The manifest's buffer list, checked against the archive's buffers/<i> entries."""
    table = manifest["buffers"]
    if not isinstance(table, list):
        raise CheckpointError(name, f"the manifest's 'buffers' is {_show(table)}, expected a list")
    names = {f"buffers/{i}" for i in range(len(table))}
    present = set(entries) - {_MANIFEST}
    if present != names:
        missing, extra = sorted(names - present), sorted(present - names)
        raise CheckpointError(name, f"the manifest lists {len(table)} buffers but the archive " +
                              (f"lacks {missing[:3]} (truncated file?)" if missing else f"also holds {extra[:3]}"))
    for i, meta in enumerate(table):
        nbytes = meta.get("nbytes") if isinstance(meta, dict) else None
        sha = meta.get("sha256") if isinstance(meta, dict) else None
        if type(nbytes) is not int or nbytes < 0 or not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
            raise CheckpointError(name, f"buffers[{i}] in the manifest is {_show(meta)}, expected "
                                        '{"nbytes": <int >= 0>, "sha256": <64 hex digits>}')
        if entries[f"buffers/{i}"].file_size != nbytes:
            raise CheckpointError(name, f"buffer {i} is corrupted: the archive holds "
                                        f"{entries[f'buffers/{i}'].file_size} bytes, the manifest says {nbytes}")
    return table


def _device_mapper(map_location):
    if map_location is None:
        return lambda dev: devices.as_device(dev)
    if isinstance(map_location, dict):
        table = {str(k): v for k, v in map_location.items()}
        return lambda dev: devices.as_device(table.get(dev, dev))
    if isinstance(map_location, (str, devices.Device)):
        target = devices.as_device(map_location)
        return lambda dev: target
    raise TypeError(f"map_location must be None, a device, or a dict of devices, got {type(map_location).__name__}")


def _show(value, limit=80):
    """A short repr of a value from the file, for error messages (the file may hold anything)."""
    try:
        text = repr(value)
    except RecursionError:
        return "<a deeply nested value>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


_MISSING = object()
_KEY_NODES = ("none", "bool", "int", "float", "str")
_TENSOR_DTYPES = tuple(d.name for d in _dt.SUPPORTED)  # what a mixprec tensor can hold


class _Reader:
    """Decodes the manifest's tree, checking every node before it touches a buffer.

    ``where`` names the node's place in the tree (root['model']['w']) in every error.
    """

    def __init__(self, zf, entries, meta, name, device_of):
        self.zf, self.entries, self.meta, self.name, self.device_of = zf, entries, meta, name, device_of
        self.claimed = {}  # buffer index -> where it was used: each buffer belongs to one node
        self.tensors = {}  # buffer index -> (node, tensor): a tied tensor loads as one object

    def fail(self, where, problem):
        return CheckpointError(self.name, f"{where}: {problem}")

    def field(self, node, key, types, where, default=_MISSING):
        """node[key], which must have one of ``types`` exactly (True is not an int here)."""
        value = node.get(key, default)
        if value is _MISSING or type(value) not in types:
            kinds = " or ".join({bool: "a bool", int: "an int", str: "a string", list: "a list"}[t] for t in types)
            got = "nothing" if value is _MISSING else _show(value)
            raise self.fail(where, f"malformed {node['t']} node: {key!r} must be {kinds}, got {got}")
        return value

    def decode(self, node, where, depth):
        if not isinstance(node, dict) or type(node.get("t")) is not str:
            raise self.fail(where, f"expected a node (an object with a string 't'), got {_show(node)}")
        t = node["t"]
        if t == "none":
            return None
        if t in ("bool", "int", "str"):
            return self.field(node, "v", {"bool": (bool,), "int": (int,), "str": (str,)}[t], where)
        if t == "float":
            return self.float(node, where)
        if t in ("list", "tuple", "dict"):
            if depth >= MAX_DEPTH:
                raise self.fail(where, f"lists/tuples/dicts nested more than {MAX_DEPTH} deep (the limit)")
            items = self.field(node, "items", (list,), where)
            if t == "dict":
                return self.dict(items, where, depth + 1)
            values = [self.decode(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(items)]
            return values if t == "list" else tuple(values)
        if t == "bytes":
            return self.read(self.claim(node, where))
        if t == "ndarray":
            return self.array(node, where, _ARRAY_DTYPES)
        if t == "scalar":
            return self.array(node, where, _ARRAY_DTYPES, shape=())[()]
        if t == "tensor":
            return self.tensor(node, where)
        raise self.fail(where, f"unknown node type {_show(t)}")

    def float(self, node, where):
        text = self.field(node, "v", (str,), where)
        if "bits" in node:
            bits = self.field(node, "bits", (str,), where)
            value = struct.unpack(">d", bytes.fromhex(bits))[0] if _BITS.fullmatch(bits) else 0.0
            if text != "nan" or value == value:
                raise self.fail(where, f"a float node with 'bits' must be a NaN: 'v' 'nan' and 16 lowercase hex "
                                       f"digits of a NaN, got {_show(text)} and {_show(bits)}")
            return value
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or repr(value) != text:
            raise self.fail(where, f"float {_show(text)} is not a float as repr() writes it (e.g. '0.001', '-inf')")
        return value

    def dict(self, items, where, depth):
        out = {}
        for i, item in enumerate(items):
            if not (isinstance(item, list) and len(item) == 2):
                raise self.fail(f"{where}.items[{i}]", f"a dict entry must be a [key node, value node] pair, got "
                                                       f"{_show(item)}")
            key_node, value_node = item
            if not (isinstance(key_node, dict) and key_node.get("t") in _KEY_NODES):
                raise self.fail(f"{where}.items[{i}]", f"a dict key must be a {'/'.join(_KEY_NODES)} node, got "
                                                       f"{_show(key_node)}")
            key = self.decode(key_node, where, depth)
            if key in out:
                raise self.fail(where, f"the dict has the key {_show(key)} twice")
            out[key] = self.decode(value_node, f"{where}[{_show(key, 40)}]", depth)
        return out

    # ---- buffers
    def index(self, node, where):
        i = node.get("buffer")
        if type(i) is not int or not 0 <= i < len(self.meta):
            raise self.fail(where, f"'buffer' is {_show(i)}, expected an index below {len(self.meta)} (the buffers "
                                   "in the file)")
        return i

    def claim(self, node, where, nbytes=None):
        """node's buffer index, after checking that no other node uses it and that it holds ``nbytes`` bytes."""
        i = self.index(node, where)
        if i in self.claimed:
            raise self.fail(where, f"buffer {i} is also used by {self.claimed[i]}; each buffer belongs to one value")
        if nbytes is not None and self.meta[i]["nbytes"] != nbytes:
            raise self.fail(where, f"buffer {i} holds {self.meta[i]['nbytes']} bytes, which does not fit shape "
                                   f"{node.get('shape', [])} of {node['dtype']} ({nbytes} bytes)")
        self.claimed[i] = where
        return i

    def read(self, i):
        data = _read_entry(self.zf, self.entries[f"buffers/{i}"], self.name, f"buffer {i}")
        if hashlib.sha256(data).hexdigest() != self.meta[i]["sha256"]:
            raise CheckpointError(self.name, f"buffer {i} is corrupted (its SHA-256 does not match the manifest)")
        return data

    def dtype(self, node, where, dtypes):
        name = node.get("dtype")
        if type(name) is not str or name not in dtypes:
            raise self.fail(where, f"unknown dtype {_show(name)} for a {node['t']}; expected one of "
                                   f"{', '.join(sorted(dtypes))}")
        return _ARRAY_DTYPES[name]

    def array(self, node, where, dtypes, shape=None):
        dtype = self.dtype(node, where, dtypes)
        shape = self.shape(node, where, dtype) if shape is None else shape
        data = self.read(self.claim(node, where, dtype.itemsize * math.prod(shape)))
        array = np.frombuffer(data, dtype=dtype).reshape(shape)
        return array.byteswap() if sys.byteorder == "big" else array.copy()

    def shape(self, node, where, dtype):
        shape = node.get("shape")
        if (not isinstance(shape, list) or len(shape) > MAX_NDIM
                or not all(type(n) is int and n >= 0 for n in shape)):
            raise self.fail(where, f"shape {_show(shape)} is not a list of at most {MAX_NDIM} non-negative ints")
        if math.prod(max(n, 1) for n in shape) * dtype.itemsize > _MAX_BYTES:
            raise self.fail(where, f"shape {_show(shape)} of {dtype.name} is larger than any array can be")
        return tuple(shape)

    def tensor(self, node, where):
        self.dtype(node, where, _TENSOR_DTYPES)
        i = self.index(node, where)
        if i in self.tensors:
            first, tensor = self.tensors[i]
            if node != first:
                raise self.fail(where, f"buffer {i} is shared with a tensor that differs ({_show(first)}); tied "
                                       "tensors are stored as identical nodes")
            return tensor
        array = self.array(node, where, _TENSOR_DTYPES)
        device = self.field(node, "device", (str,), where)
        requires_grad = self.field(node, "requires_grad", (bool,), where, default=False)
        parameter = self.field(node, "parameter", (bool,), where, default=False)
        try:
            devices.parse(device)
        except ValueError:
            raise self.fail(where, f"unknown device {_show(device)}; expected 'cpu' or 'cuda:N'") from None
        if requires_grad and not _dt.is_differentiable(array.dtype):
            raise self.fail(where, f"a {array.dtype.name} tensor cannot require grad (only floating and complex "
                                   "ones can)")
        try:
            target = self.device_of(device)
        except availability.DeviceUnavailableError as exc:
            raise availability.DeviceUnavailableError(f"{self.name}: a tensor was saved on {device}, which is not "
                                             f"available here ({exc}); pass map_location='cpu'") from None
        array = devices.to_device(array, target)
        if parameter:
            out = Parameter(array, requires_grad=requires_grad)
        else:
            out = Tensor._wrap(array)
            out.requires_grad = requires_grad
        self.tensors[i] = (node, out)
        return out
