# Copyright: contributors to llmops.sglang
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A real CUDA library (tests/fixtures/fatbin/libfatbin_mix.so) rewritten so that its section header table names one
large .nv_fatbin region many times: the shape that kept a reader walking the same bytes once per header."""

import struct

ELF_SECTION = struct.Struct("<IIQQQQIIQQ")


def _align(data, to):
    data += b"\0" * (-len(data) % to)


def repeat_fatbin(library, copies, padding):
    """(new file bytes, shift): the library's .nv_fatbin bytes copied to the end of the file and followed by padding
    zero bytes (allowed between fatbins), and a new section header table at the end where that region is named
    ``copies`` times (the original .nv_fatbin header and copies - 1 more). shift is how far the fatbin moved: an
    entry of the original at offset O is at O + shift in the new file. copies=1 gives the honest file of that shape."""
    data = bytearray(library)
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [list(ELF_SECTION.unpack_from(data, shoff + i * shentsize)) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    at = [i for i, h in enumerate(headers) if bytes(data[names_at + h[0]:names_at + h[0] + 11]) == b".nv_fatbin\0"][0]
    offset, size = headers[at][4], headers[at][5]
    fatbin = bytes(data[offset:offset + size])
    _align(data, 16)
    moved = len(data)
    data += fatbin + b"\0" * padding
    headers[at][4], headers[at][5] = moved, size + padding
    table = headers + [list(headers[at]) for _i in range(copies - 1)]
    if len(table) >= 0xFF00:
        raise ValueError("%d sections need extended numbering" % len(table))
    _align(data, 8)
    struct.pack_into("<Q", data, 0x28, len(data))
    struct.pack_into("<H", data, 0x3C, len(table))
    for header in table:
        data += ELF_SECTION.pack(*header)
    return bytes(data), moved - offset
