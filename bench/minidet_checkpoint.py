"""Reading and writing minidet checkpoint files (docs/checkpoint-format.md) in plain Python.

A checkpoint is an ordered list of named tensors. Here an entry is an `Entry(dtype, shape, data)`: the dtype's
name ("float32", "float64", "int64", "bool", "uint8"), the shape as a tuple and the raw little-endian bytes,
so the module needs nothing beyond the standard library (the round-trip test of the weight mapping runs
without numpy or torch). `to_torch` / `from_torch` turn an entry into a tensor and back when torch is there.

    entries = read_checkpoint("runs/a/last.ckpt")          # {name: Entry}, in file order
    write_checkpoint("copy.ckpt", entries)                 # the same bytes back
"""
import ctypes
import os
import struct
from collections import namedtuple

MAGIC = b"MDETCKPT"
VERSION = 1
MAX_DIMS = 12
# dtype code -> (name, element size); the codes of core/dtype.h
DTYPES = {0: ("float32", 4), 1: ("float64", 8), 2: ("int64", 8), 3: ("bool", 1), 4: ("uint8", 1)}
CODES = {name: code for code, (name, _) in DTYPES.items()}
FNV_OFFSET, FNV_PRIME = 14695981039346656037, 1099511628211

Entry = namedtuple("Entry", "dtype shape data")


class CheckpointError(ValueError):
    pass


def fnv1a(data):
    """FNV-1a 64 of bytes (the file's checksum). Pure Python: about 10 MB/s, enough for a tiny detector."""
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def read_checkpoint(path):
    """{name: Entry} in file order. Refuses what load_checkpoint refuses, naming the file and the problem,
    except NaN or Inf values, which it reads as they are (as NonFiniteValues::kAllow does), so that the
    weights of a diverged run can be looked at."""
    with open(path, "rb") as f:
        blob = f.read()

    def fail(what):
        raise CheckpointError(f"checkpoint {path}: {what}")

    if len(blob) < 32 or blob[:8] != MAGIC:
        fail("not a minidet checkpoint (bad magic number or too short)")
    version, _reserved, count = struct.unpack_from("<IIQ", blob, 8)
    if version != VERSION:
        fail(f"unknown format version {version} (this reader knows {VERSION})")
    (checksum,) = struct.unpack_from("<Q", blob, len(blob) - 8)
    if fnv1a(blob[:-8]) != checksum:
        fail("checksum mismatch (the file is truncated or corrupt)")
    end, pos, entries = len(blob) - 8, 24, {}

    def take(n, what):
        nonlocal pos
        if n > end - pos:
            fail(f"truncated while reading {what} at byte {pos}")
        chunk = blob[pos:pos + n]
        pos += n
        return chunk

    for _ in range(count):
        (length,) = struct.unpack("<I", take(4, "a name length"))
        name = take(length, "a name").decode("utf-8")
        code, dims = take(1, "a dtype")[0], take(1, "a dim count")[0]
        if code not in DTYPES:
            fail(f"'{name}' has unknown dtype code {code}")
        if dims > MAX_DIMS:
            fail(f"'{name}' has {dims} dims (at most {MAX_DIMS})")
        shape = struct.unpack(f"<{dims}q", take(8 * dims, "sizes"))
        (nbytes,) = struct.unpack("<Q", take(8, "a data length"))
        dtype, size = DTYPES[code]
        if any(s < 0 for s in shape) or nbytes != numel(shape) * size:
            fail(f"'{name}' has {nbytes} data bytes for shape {list(shape)} of {dtype}")
        if name in entries:
            fail(f"duplicate entry '{name}'")
        entries[name] = Entry(dtype, tuple(shape), take(nbytes, f"the data of '{name}'"))
    if pos != end:
        fail(f"{end - pos} trailing bytes after the last entry")
    return entries


def write_checkpoint(path, entries):
    """Writes {name: Entry} in its order, as save_checkpoint does: to path.tmp, fsync, rename."""
    out = bytearray(MAGIC)
    out += struct.pack("<IIQ", VERSION, 0, len(entries))
    for name, entry in entries.items():
        if entry.dtype not in CODES:
            raise CheckpointError(f"'{name}': dtype {entry.dtype} has no checkpoint code")
        if len(entry.shape) > MAX_DIMS:
            raise CheckpointError(f"'{name}' has {len(entry.shape)} dims (at most {MAX_DIMS})")
        if len(entry.data) != numel(entry.shape) * DTYPES[CODES[entry.dtype]][1]:
            raise CheckpointError(f"'{name}': {len(entry.data)} bytes for shape {list(entry.shape)} of {entry.dtype}")
        encoded = name.encode("utf-8")
        out += struct.pack("<I", len(encoded)) + encoded
        out += struct.pack("<BB", CODES[entry.dtype], len(entry.shape))
        out += struct.pack(f"<{len(entry.shape)}q", *entry.shape)
        out += struct.pack("<Q", len(entry.data)) + entry.data
    out += struct.pack("<Q", fnv1a(out))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def to_torch(torch, entry):
    """The entry as a CPU tensor of its own dtype and shape (a copy)."""
    dtype = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "bool": torch.bool,
             "uint8": torch.uint8}[entry.dtype]
    flat = torch.frombuffer(bytearray(entry.data), dtype=dtype) if entry.data else torch.empty(0, dtype=dtype)
    return flat.reshape(entry.shape).clone()


def from_torch(torch, tensor):
    """An Entry from a tensor (moved to the CPU, made contiguous)."""
    name = str(tensor.dtype).replace("torch.", "")
    if name not in CODES:
        raise CheckpointError(f"dtype {tensor.dtype} has no checkpoint code")
    t = tensor.detach().cpu().contiguous()
    # The bytes straight from the tensor's memory: .numpy() would need numpy, which a torch install may lack.
    data = ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""
    return Entry(name, tuple(t.shape), data)
