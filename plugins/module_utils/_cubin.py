# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernels of one cubin (a CUDA device ELF), read from its symbol table, and the identifiers of their names.

Stdlib only, Python 3.8+. A kernel is a defined ``STT_FUNC`` symbol whose ``st_other`` carries the CUDA entry flag
0x10: what ``cuobjdump --dump-elf-symbols`` prints as ``ENTRY``, checked on tests/fixtures/fatbin/libkernel_names.so
(a ``__device__`` function is a ``FUNC`` without it) and on the sgl-kernel 0.4.5/0.4.10 wheels. Its ``st_size`` is
the size of its code, so a trap-only stub shows as a few hundred bytes.

Kernel names are Itanium-mangled (``_ZN7fixture4gemm15fp4_gemm_kernelIN7cutlass12float_e2m1_tEEEvPKT_PKfPfi``) or
plain (``extern "C"``). ``identifiers`` takes the source names (``<length><identifier>``) out of a mangled name in
the order they appear, skipping the numbers that are not lengths (template literals ``Li128E`` and enum values
``LN3cub9AlgorithmE2E``, substitutions ``S0_``, template parameters ``T_``, vector and array sizes, discriminators); ``readable`` joins them with ``::``.
That is not a demangler: a name repeated through a substitution appears once, where it first occurs.
"""

from __future__ import annotations

import re
import struct

STT_FUNC = 2
STO_CUDA_ENTRY = 0x10
SHT_SYMTAB = 2
# Bounds: a cubin's section and symbol counts (sgl-kernel's largest cubins have a few hundred kernels).
MAX_SECTIONS = 65536
MAX_SYMBOLS = 1000000

_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")

# What may stand at the place of a length and is not one (see the module docstring), tried before a length at each
# place: searching for either finds the next place where one starts.
_NEXT = re.compile(
    r"(?:L[a-z]n?[0-9a-f]+E"        # a literal in template arguments: Li128E, Lb1E, Lin1E, Lf3f800000E
    r"|S[0-9A-Z]*_|S[a-z]"          # a substitution S_, S0_, SA_, or an abbreviation St, Sa, Ss
    r"|T[0-9]*_"                    # a template parameter T_, T0_
    r"|Dv[0-9]+_|A[0-9]+_"          # a vector or array size
    r"|fp[0-9]*_|fL[0-9]+p[0-9]*_"  # a function parameter reference
    r"|Ut[0-9]*_"                   # an unnamed type
    r"|_[0-9]_|__[0-9]+_|_[0-9]"    # a discriminator
    r"|[CD][0-9])"                  # a constructor or destructor
    r"|(L)(?=[NS1-9])"              # a literal of a class type (an enum value): LN3cub9AlgorithmE2E
    r"|([1-9][0-9]*)")              # a length
# The value that ends a literal of a class type, after the type's last name or substitution.
_LITERAL_VALUE = re.compile(r"E?n?[0-9]+E")
_IDENTIFIER = re.compile(r"_*[A-Za-z$][A-Za-z0-9_$.]*\Z")  # not all underscores (a lambda number E1_ is not a name)


class CubinError(Exception):
    """A cubin whose symbol table cannot be read; the message says where and why."""


def kernels(data):
    """``[(name, code size), ...]`` of the kernels of a cubin (bytes), in symbol table order."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise CubinError("the cubin is not an ELF file (no \\x7fELF magic)")
    if data[4] != 2 or data[5] != 1:
        raise CubinError("the cubin is not a 64-bit little-endian ELF file (class %d, data %d)" % (data[4], data[5]))
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shoff == 0 or shnum == 0:
        return []
    if shentsize < _SECTION.size or shnum > MAX_SECTIONS or shoff + shnum * shentsize > len(data):
        raise CubinError("the cubin's section table (%d entries of %d bytes at offset %d) does not fit its %d bytes"
                         % (shnum, shentsize, shoff, len(data)))
    sections = [_SECTION.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    found = []
    for section in sections:
        if section[1] != SHT_SYMTAB:
            continue
        offset, size, link, entsize = section[4], section[5], section[6], section[9]
        if entsize < _SYMBOL.size or offset + size > len(data) or link >= shnum:
            raise CubinError("the cubin's symbol table (%d bytes at offset %d, entries of %d bytes, names in section %d) "
                             "does not fit the cubin" % (size, offset, entsize, link))
        names_at, names_size = sections[link][4], sections[link][5]
        if names_at + names_size > len(data):
            raise CubinError("the cubin's symbol names (%d bytes at offset %d) run past its end" % (names_size, names_at))
        if size // entsize + len(found) > MAX_SYMBOLS:
            raise CubinError("the cubin has more than %d symbols" % MAX_SYMBOLS)
        for at in range(offset, offset + size - entsize + 1, entsize):
            name, info, other, shndx, _value, code = _SYMBOL.unpack_from(data, at)
            if info & 0xF != STT_FUNC or not other & STO_CUDA_ENTRY or shndx == 0 or name >= names_size:
                continue
            end = data.find(b"\0", names_at + name, names_at + names_size)
            found.append((data[names_at + name:end if end >= 0 else names_at + names_size].decode("utf-8", "replace"), code))
    return found


def identifiers(name):
    """The source names of a mangled name, in order (``['fixture', 'gemm', 'fp4_gemm_kernel', 'cutlass',
    'float_e2m1_t']``); a name that is not mangled (``extern "C"``) is its own single identifier."""
    if not name.startswith("_Z"):
        return [name] if name else []
    found = []
    at, end = 2, len(name)
    literal = False
    while True:
        token = _NEXT.search(name, at)
        if token is None:
            return found
        at = token.end()
        if token.group(1):
            literal = True
            continue
        if token.group(2):
            size = int(token.group(2)) if len(token.group(2)) < 7 else end
            word = name[at:at + size]
            if at + size > end or not _IDENTIFIER.match(word):
                continue
            found.append(word)
            at += size
        elif not token.group().startswith("S"):
            continue
        value = _LITERAL_VALUE.match(name, at) if literal else None
        if value:
            at, literal = value.end(), False


def readable(name):
    """The identifiers of a kernel name joined by ``::`` (``fixture::gemm::fp4_gemm_kernel::cutlass::float_e2m1_t``)."""
    return "::".join(identifiers(name))
