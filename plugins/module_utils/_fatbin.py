# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read the CUDA fatbin entry headers of a 64-bit little-endian ELF shared library (stdlib only, Python 3.8+).

Only headers are read, through a read-only mmap: the ELF section header table, the ``.nv_fatbin`` section's
container and entry headers; never a payload. A 545 MB libcublasLt.so.13 takes well under a second. Sections that
name the same bytes (a crafted table can repeat one region 65,536 times) are walked once: the work is bounded by the
file's size.

Layout relied on (little-endian). Confirmed by comparing every field used below with what cuobjdump 13.5.37
(``--list-elf``, ``--list-ptx``, ``--dump-elf-symbols``) says on tests/fixtures/fatbin/libfatbin_mix.so (nvcc 13.0:
sm_120, sm_120a, sm_120f, sm_100f, sm_90a, sm_80 and sm_75 cubins, PTX for compute_90a, compute_120f, compute_80,
plain and zstd-compressed entries), on the fixture kernel builds of tests/fixtures/cuobjdump, and on the 545 MB
libcublasLt.so.13 of PyPI nvidia-cublas 13.8.2.12 (5,351 cubins in 2,634 containers, 1,133 of them sm_120f):

- ELF section ``.nv_fatbin`` (found by name through ``e_shstrndx``) holds containers back to back, zero padding
  allowed between them.
- Container header, 16 bytes: u32 magic 0xBA55ED50, u16 version (1), u16 header size (16), u64 size of the
  entries that follow.
- Entry header, ``header size`` bytes (64 to 120 seen), followed by its payload:
  +0 u16 kind (1 = PTX, 2 = ELF cubin), +2 u16 version (0x0101), +4 u32 header size, +8 u64 payload size
  (the next entry starts at entry + header size + payload size), +28 u32 arch number (120 for sm_120),
  +40 u64 flags.
- Flags: 0x100000 arch-specific (``sm_120a``), 0x200000 family (``sm_120f``, which ``--list-elf`` prints as
  ``sm_120``), 0x8000 payload compressed as a zstd frame (nvcc's default), 0x2000 compressed as an LZ4 block
  (``--compress-mode=speed``, and older toolkits).
- A compressed entry's header also holds, at +16, the u32 size of the compressed data (the payload is that,
  padded to 8 bytes) and at +56 the u64 size of the unpacked cubin; both were checked against the cubins that
  ``cuobjdump -xelf all`` unpacks from tests/fixtures/fatbin/libkernel_names.so and against the sgl-kernel
  0.4.5/0.4.10 wheels (docs/evidence/sgl-kernel-fp4-kernels.md). Each entry is one file of cuobjdump's listing, in file order, numbered
  per kind from 1 (``libfoo.3.sm_120a.cubin``).
- The embedded cubin's own ELF header does not tell them apart: its e_flags are 0x6007802 for sm_120, sm_120a and
  sm_120f alike (nvcc 13.0), and a compressed payload would have to be unpacked first; the entry flags are read.
"""

from __future__ import annotations

import mmap
import os
import struct

FATBIN_SECTION = b".nv_fatbin"
FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2
KIND_NAMES = {KIND_PTX: "ptx", KIND_ELF: "elf"}
FLAG_COMPRESSED = 0x8000  # zstd
FLAG_LZ4 = 0x2000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000
ENTRY_MIN_HEADER = 64
# Bounds: libcublasLt.so.13 has 2,634 containers and 5,650 entries; sections are counted by a u16 unless the ELF
# uses extended numbering.
MAX_ENTRIES = 1000000
MAX_SECTIONS = 65536
# The largest cubin unpacked for its symbols (libcublasLt's largest is a few MB, sgl-kernel's under 1 MB).
MAX_CUBIN_BYTES = 512 * 1024 * 1024
_ZERO_CHUNK = 1 << 20

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQ")
_ARCH = struct.Struct("<I")
_FLAGS = struct.Struct("<Q")
_PACKED = struct.Struct("<I")
_UNPACKED = struct.Struct("<Q")
_SECTION = struct.Struct("<IIQQQQIIQQ")


class FatbinError(Exception):
    """A file that is not a readable ELF with fatbins; the message names where and why."""


def arch_name(number, flags):
    """``(120, flags)`` -> ``sm_120``, ``sm_120a`` or ``sm_120f``."""
    if flags & FLAG_ARCH_SPECIFIC and flags & FLAG_FAMILY:
        raise FatbinError("both the arch-specific and the family flag are set (flags 0x%x)" % flags)
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    return "sm_%d%s" % (number, suffix)


def compression(flags):
    """'zstd', 'lz4' or None: how an entry's payload is compressed."""
    return "zstd" if flags & FLAG_COMPRESSED else "lz4" if flags & FLAG_LZ4 else None


def listed_name(library, kind, index, arch):
    """The name cuobjdump's listing gives an entry: ``libfoo.2.sm_120.cubin`` (a family cubin without its ``f``)."""
    base = os.path.splitext(os.path.basename(library))[0]
    if kind == "elf":
        return "%s.%d.%s.cubin" % (base, index, arch[:-1] if arch.endswith("f") else arch)
    return "%s.%d.%s.ptx" % (base, index, arch)


def _sections(view, size):
    """(name, offset, size, type) of every section, from the section header table."""
    if size < 64 or view[:4] != b"\x7fELF":
        raise FatbinError("not an ELF file (no \\x7fELF magic)")
    if view[4] != 2 or view[5] != 1:
        raise FatbinError("not a 64-bit little-endian ELF file (class %d, data %d)" % (view[4], view[5]))
    shoff = struct.unpack_from("<Q", view, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", view, 0x3A)
    if shoff == 0:
        return []
    if shentsize < _SECTION.size:
        raise FatbinError("section header entries of %d bytes (64 expected)" % shentsize)
    if shoff + _SECTION.size > size:
        raise FatbinError("the section header table at offset %d lies beyond the end of the file (%d bytes): "
                          "the file is truncated" % (shoff, size))
    if shnum == 0:  # extended numbering: the count is in section 0's sh_size
        shnum = _SECTION.unpack_from(view, shoff)[5]
    if shstrndx == 0xFFFF:
        shstrndx = _SECTION.unpack_from(view, shoff)[7]
    if shnum > MAX_SECTIONS:
        raise FatbinError("the ELF header claims %d sections, more than %d" % (shnum, MAX_SECTIONS))
    if shoff + shnum * shentsize > size:
        raise FatbinError("the section header table (%d entries at offset %d) runs past the end of the file "
                          "(%d bytes): the file is truncated" % (shnum, shoff, size))
    headers = [_SECTION.unpack_from(view, shoff + i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        raise FatbinError("the section name table index %d is out of range (%d sections)" % (shstrndx, shnum))
    names_at, names_size = headers[shstrndx][4], headers[shstrndx][5]
    if names_at + names_size > size:
        raise FatbinError("the section name table runs past the end of the file: the file is truncated")
    sections = []
    for header in headers:
        start = names_at + header[0]
        # a name is looked for within 256 bytes: a corrupt table without NULs is not copied whole
        end = view.find(b"\0", start, min(names_at + names_size, start + 256)) if header[0] < names_size else -1
        name = bytes(view[start:end]) if end >= 0 else b""
        sections.append((name, header[4], header[5], header[1]))
    return sections


def _zeros(view, start, end):
    """Whether view[start:end] is all zero bytes (checked in bounded chunks)."""
    for at in range(start, end, _ZERO_CHUNK):
        chunk = view[at:min(end, at + _ZERO_CHUNK)]
        if chunk.count(0) != len(chunk):
            return False
    return True


def _walk(view, start, end, entries):
    """Append (kind, arch number, flags, entry offset, payload size) of every entry in [start, end)."""
    magic = struct.pack("<I", FATBIN_MAGIC)
    pos = start
    while pos < end:
        found = view.find(magic, pos, end)
        if found < 0:
            found = end
        if not _zeros(view, pos, found):
            raise FatbinError("unexpected data at offset %d of the .nv_fatbin section where a fatbin header "
                              "(magic 0x%X) should start: the section is corrupt" % (pos - start, FATBIN_MAGIC))
        pos = found
        if pos >= end:
            return
        if pos + _CONTAINER.size > end:
            raise FatbinError("the fatbin header at file offset %d is cut off: the section is truncated" % pos)
        _magic, _version, header_size, body = _CONTAINER.unpack_from(view, pos)
        container_end = pos + header_size + body
        if header_size < _CONTAINER.size or container_end > end:
            raise FatbinError("the fatbin at file offset %d claims %d bytes, past the end of its section: "
                              "the section is truncated or corrupt" % (pos, header_size + body))
        at = pos + header_size
        while at < container_end:
            if len(entries) >= MAX_ENTRIES:
                raise FatbinError("more than %d fatbin entries: not a library to inspect" % MAX_ENTRIES)
            if at + ENTRY_MIN_HEADER > container_end:
                raise FatbinError("the fatbin entry at file offset %d is cut off: the fatbin is corrupt" % at)
            kind, _version, entry_size, payload = _ENTRY.unpack_from(view, at)
            if entry_size < ENTRY_MIN_HEADER or at + entry_size + payload > container_end:
                raise FatbinError("the fatbin entry at file offset %d claims a %d-byte header and %d bytes of code, "
                                  "past the end of its fatbin: the fatbin is corrupt" % (at, entry_size, payload))
            number = _ARCH.unpack_from(view, at + 28)[0]
            flags = _FLAGS.unpack_from(view, at + 40)[0]
            entries.append((kind, number, flags, at, payload))
            at += entry_size + payload
        pos = container_end


def fatbin_regions(sections, size):
    """The file ranges ``(start, end)`` that hold fatbins: the ``.nv_fatbin`` sections with contents, in file order,
    repeated or overlapping ones merged into one range. A section table can name one region up to 65,536 times;
    merged, each byte of the file is walked at most once, so the work is bounded by the file's size."""
    ranges = []
    for name, offset, length, kind in sections:
        if name != FATBIN_SECTION or kind == 8:  # 8: SHT_NOBITS, no bytes in the file
            continue
        if offset + length > size:
            raise FatbinError("the .nv_fatbin section (%d bytes at offset %d) runs past the end of the file "
                              "(%d bytes): the file is truncated" % (length, offset, size))
        if length:
            ranges.append((offset, offset + length))
    merged = []
    for start, end in sorted(set(ranges)):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def read_entries(path):
    """The fatbin entries of a library: ``(has_fatbin, [entry, ...])``, each entry a dict with ``kind``
    ('elf', 'ptx' or 'kind_N'), ``arch`` (``sm_120f``), ``index`` (per kind, from 1, as cuobjdump numbers them),
    ``name`` (cuobjdump's), ``offset`` (of the entry header in the file), ``size`` (of its payload) and
    ``compressed``. Raises FatbinError (message without the path) for a file it cannot read as such."""
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise FatbinError("cannot be opened: %s" % (exc.strerror or exc))
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size < 64:
            raise FatbinError("not an ELF file (%d bytes)" % size)
        view = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            raw = []
            sections = [s for s in _sections(view, size) if s[0] == FATBIN_SECTION and s[3] != 8]  # 8: SHT_NOBITS
            for start, end in fatbin_regions(sections, size):
                _walk(view, start, end, raw)
        finally:
            view.close()
    entries = []
    counters = {}
    for kind, number, flags, offset, payload in raw:
        name = KIND_NAMES.get(kind, "kind_%d" % kind)
        try:
            arch = arch_name(number, flags)
        except FatbinError as exc:
            raise FatbinError("the fatbin entry at file offset %d: %s" % (offset, exc))
        counters[name] = counters.get(name, 0) + 1
        entries.append({"kind": name, "arch": arch, "index": counters[name],
                        "name": listed_name(path, name, counters[name], arch) if kind in KIND_NAMES else None,
                        "offset": offset, "size": payload, "compressed": compression(flags) is not None})
    return bool(sections), entries


def read_payload(handle, offset):
    """``(compression, data, unpacked size)`` of the entry whose header is at ``offset`` of an open file: the payload
    bytes as stored (compressed ones without their padding), checked against the file and MAX_CUBIN_BYTES."""
    handle.seek(offset)
    header = handle.read(ENTRY_MIN_HEADER)
    size = os.fstat(handle.fileno()).st_size
    if len(header) < ENTRY_MIN_HEADER:
        raise FatbinError("the fatbin entry at file offset %d is cut off: the file is truncated" % offset)
    _kind, _version, header_size, payload = _ENTRY.unpack_from(header)
    if header_size < ENTRY_MIN_HEADER or offset + header_size + payload > size:
        raise FatbinError("the fatbin entry at file offset %d claims %d bytes, past the end of the file" % (offset, header_size + payload))
    method = compression(_FLAGS.unpack_from(header, 40)[0])
    packed, unpacked = payload, payload
    if method:
        packed, unpacked = _PACKED.unpack_from(header, 16)[0], _UNPACKED.unpack_from(header, 56)[0]
        if packed > payload or packed == 0:
            raise FatbinError("the fatbin entry at file offset %d claims %d compressed bytes in a %d-byte payload: "
                              "the fatbin is corrupt" % (offset, packed, payload))
    if unpacked > MAX_CUBIN_BYTES:
        raise FatbinError("the cubin at file offset %d unpacks to %d bytes, more than the %d a cubin may have here"
                          % (offset, unpacked, MAX_CUBIN_BYTES))
    handle.seek(offset + header_size)
    return method, handle.read(packed), unpacked


def lz4_block(data, size):
    """An LZ4 block (the format of the 0x2000 entries, no frame around it) unpacked to exactly ``size`` bytes; never
    writes more than that. Raises FatbinError for data that is not such a block."""
    out = bytearray()
    at, end = 0, len(data)
    while at < end:
        token = data[at]
        at += 1
        literals = token >> 4
        if literals == 15:
            while True:
                if at >= end:
                    raise FatbinError("an LZ4 literal length runs past the end of the block: the data is corrupt")
                literals += data[at]
                at += 1
                if data[at - 1] != 255:
                    break
        if at + literals > end or len(out) + literals > size:
            raise FatbinError("an LZ4 literal run goes past the end of the block or of the %d bytes the header declares" % size)
        out += data[at:at + literals]
        at += literals
        if at == end:  # the last sequence has literals only
            break
        if at + 2 > end:
            raise FatbinError("an LZ4 match offset is cut off: the data is corrupt")
        distance = data[at] | data[at + 1] << 8
        at += 2
        length = token & 15
        if length == 15:
            while True:
                if at >= end:
                    raise FatbinError("an LZ4 match length runs past the end of the block: the data is corrupt")
                length += data[at]
                at += 1
                if data[at - 1] != 255:
                    break
        length += 4
        if distance == 0 or distance > len(out) or len(out) + length > size:
            raise FatbinError("an LZ4 match (offset %d, %d bytes) points before the data or past the %d bytes the header "
                              "declares: the data is corrupt" % (distance, length, size))
        window = out[len(out) - distance:len(out) - distance + length]
        # an offset shorter than the match repeats the window (run-length encoding)
        out += (window * (length // len(window) + 1))[:length]
    if len(out) != size:
        raise FatbinError("an LZ4 block unpacked to %d bytes where the header declares %d: the data is corrupt" % (len(out), size))
    return bytes(out)
