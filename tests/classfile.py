"""Read a Java class file without Java: its string and double constants, and the source line of
each string a method loads (``ldc``), from the method's ``LineNumberTable``.

Enough of the class-file format (JVMS chapter 4) for the metric-name test to check that a name
cited as "this class, this line" is a constant loaded at that line of Pulsar's own build.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4,
          18: 4, 19: 2, 20: 2}
"""Bytes after the tag of each constant-pool entry but UTF-8 (1), which carries its length."""
_OPERANDS = {**dict.fromkeys((0x10, 0x12, 0x15, 0x16, 0x17, 0x18, 0x19, 0x36, 0x37, 0x38, 0x39,
                              0x3A, 0xA9, 0xBC), 1),
             **dict.fromkeys((0x11, 0x13, 0x14, 0x84, *range(0x99, 0xA9), 0xB2, 0xB3, 0xB4, 0xB5,
                              0xB6, 0xB7, 0xB8, 0xBB, 0xBD, 0xC0, 0xC1, 0xC6, 0xC7), 2),
             0xC5: 3, 0xB9: 4, 0xBA: 4, 0xC8: 4, 0xC9: 4}
"""Operand bytes of each opcode that has fixed operands (the switches and ``wide`` vary)."""


@dataclass
class ClassFile:
    strings: set[str] = field(default_factory=set)
    doubles: set[float] = field(default_factory=set)
    loads: dict[str, set[int]] = field(default_factory=dict)
    """Each string constant a method loads -> the source lines it is loaded at."""


def read_class(jar: Path, name: str) -> ClassFile:
    """The class ``name`` (``a/b/C``, no ``.class``) of ``jar``."""
    with zipfile.ZipFile(jar) as archive:
        data = archive.read(name + ".class")
    return parse(data)


def parse(data: bytes) -> ClassFile:
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    pool, pos = _pool(data)
    out = ClassFile(strings={v for k, v in pool.values() if k == "string"},
                    doubles={v for k, v in pool.values() if k == "double"})
    pos += 6
    pos += 2 + 2 * _u2(data, pos)  # interfaces
    for _ in range(2):  # fields, then methods
        count, pos = _u2(data, pos), pos + 2
        for _ in range(count):
            attributes, pos = _attributes(data, pos + 6, pool)
            for attr_name, body in attributes:
                if attr_name == "Code":
                    _code(body, pool, out)
    return out


def _u2(data: bytes, pos: int) -> int:
    return int(struct.unpack_from(">H", data, pos)[0])


def _pool(data: bytes) -> tuple[dict[int, tuple[str, object]], int]:
    count, pos, index = _u2(data, 8), 10, 1
    utf8: dict[int, str] = {}
    raw: dict[int, tuple[str, object]] = {}
    while index < count:
        tag = data[pos]
        if tag == 1:
            length = _u2(data, pos + 1)
            utf8[index] = data[pos + 3:pos + 3 + length].decode("utf-8", "replace")
            pos += 3 + length
        else:
            if tag == 8:
                raw[index] = ("string_ref", _u2(data, pos + 1))
            elif tag == 6:
                raw[index] = ("double", struct.unpack_from(">d", data, pos + 1)[0])
            pos += 1 + _SIZES[tag]
        index += 2 if tag in (5, 6) else 1
    pool: dict[int, tuple[str, object]] = {i: ("utf8", s) for i, s in utf8.items()}
    for i, (kind, value) in raw.items():
        pool[i] = ("string", utf8[int(str(value))]) if kind == "string_ref" else (kind, value)
    return pool, pos


def _attributes(data: bytes, pos: int, pool: dict[int, tuple[str, object]]) -> tuple[list[tuple[str, bytes]], int]:
    count, pos = _u2(data, pos), pos + 2
    out = []
    for _ in range(count):
        name = str(pool[_u2(data, pos)][1])
        length = int(struct.unpack_from(">I", data, pos + 2)[0])
        out.append((name, data[pos + 6:pos + 6 + length]))
        pos += 6 + length
    return out, pos


def _code(body: bytes, pool: dict[int, tuple[str, object]], out: ClassFile) -> None:
    length = int(struct.unpack_from(">I", body, 4)[0])
    code = body[8:8 + length]
    pos = 8 + length
    pos += 2 + 8 * _u2(body, pos)  # exception table
    attributes, _ = _attributes(body, pos, pool)
    table = sorted(pair for name, sub in attributes if name == "LineNumberTable"
                   for pair in struct.iter_unpack(">HH", sub[2:]))
    for offset, index in _ldc(code):
        kind, value = pool.get(index, ("", None))
        if kind == "string":
            starts = [ln for pc, ln in table if pc <= offset]  # the last entry at or before it
            out.loads.setdefault(str(value), set()).add(starts[-1] if starts else 0)


def _ldc(code: bytes) -> Iterator[tuple[int, int]]:
    """(bytecode offset, constant index) of every ``ldc``/``ldc_w``."""
    pos = 0
    while pos < len(code):
        op = code[pos]
        if op == 0x12:
            yield pos, code[pos + 1]
        elif op == 0x13:
            yield pos, _u2(code, pos + 1)
        if op in (0xAA, 0xAB):  # tableswitch, lookupswitch: padded to 4, then their tables
            base = (pos + 4) & ~3
            if op == 0xAA:
                low, high = struct.unpack_from(">ii", code, base + 4)
                pos = base + 12 + 4 * (high - low + 1)
            else:
                pos = base + 8 + 8 * int(struct.unpack_from(">i", code, base + 4)[0])
            continue
        if op == 0xC4:  # wide
            pos += 6 if code[pos + 1] == 0x84 else 4
            continue
        pos += 1 + _OPERANDS.get(op, 0)
