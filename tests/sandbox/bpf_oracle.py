"""An independent classic-BPF interpreter for seccomp filters: what a filter answers, so two
filters can be compared by what they do rather than by their bytes.

runc's filter for one spec is not one byte string: its ENOSYS stub checks the architectures in
Go map order, so two containers of the same spec hold different orderings of one program. The
comparison runs both filters over every system-call number of every architecture they name
(and a foreign one), and, for each call whose answer reads an argument, over every constant
either filter compares an argument with, its neighbours, and those in the high word too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

_MASK = 0xFFFFFFFF
AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_AARCH64 = 0xC00000B7
AUDIT_ARCH_ARM = 0x40000028
_X32_BIT = 0x40000000
_ARGS_AT = 16  # offset of args[0] in struct seccomp_data


def instructions(program: bytes) -> list[tuple[int, int, int, int]]:
    if not program or len(program) % 8:
        raise ValueError("not a whole number of BPF instructions")
    return [struct.unpack_from("<HBBI", program, at) for at in range(0, len(program), 8)]


def seccomp_data(nr: int, arch: int, args: tuple[int, ...] = (0,) * 6) -> bytes:
    return struct.pack("<IIQ6Q", nr & _MASK, arch, 0, *args)


def run(program: list[tuple[int, int, int, int]], data: bytes) -> tuple[int, frozenset[int]]:
    """The filter's return value for ``data``, and which system-call arguments it read."""
    accumulator, index, pc, memory = 0, 0, 0, [0] * 16
    read_args: set[int] = set()
    for _ in range(len(program) + 1):  # classic BPF only jumps forward
        code, jt, jf, k = program[pc]
        pc += 1
        if code == 0x15:  # jeq k: most of a seccomp filter, so tested first
            pc += jt if accumulator == k else jf
            continue
        kind = code & 0x07
        if code == 0x20:  # ld w abs
            if k >= _ARGS_AT:
                read_args.add((k - _ARGS_AT) // 8)
            accumulator = struct.unpack_from("<I", data, k)[0]
        elif code == 0x00:  # ld imm
            accumulator = k
        elif code == 0x60:  # ld mem
            accumulator = memory[k]
        elif code == 0x01:  # ldx imm
            index = k
        elif code == 0x61:  # ldx mem
            index = memory[k]
        elif code == 0x02:  # st
            memory[k] = accumulator
        elif code == 0x03:  # stx
            memory[k] = index
        elif kind == 0x04:  # alu
            operand = index if code & 0x08 else k
            operation = code & 0xF0
            if operation == 0x50:
                accumulator &= operand
            elif operation == 0x40:
                accumulator |= operand
            elif operation == 0x00:
                accumulator = (accumulator + operand) & _MASK
            elif operation == 0x10:
                accumulator = (accumulator - operand) & _MASK
            elif operation == 0x60:
                accumulator = (accumulator << operand) & _MASK
            elif operation == 0x70:
                accumulator >>= operand
            elif operation == 0xA0:
                accumulator ^= operand
            else:
                raise ValueError(f"unknown ALU instruction {code:#x}")
        elif code == 0x05:  # ja
            pc += k
        elif kind == 0x05:  # conditional jumps
            operand = index if code & 0x08 else k
            test = code & 0xF0
            if test == 0x10:
                taken = accumulator == operand
            elif test == 0x20:
                taken = accumulator > operand
            elif test == 0x30:
                taken = accumulator >= operand
            elif test == 0x40:
                taken = bool(accumulator & operand)
            else:
                raise ValueError(f"unknown jump {code:#x}")
            pc += jt if taken else jf
        elif code == 0x06:  # ret k
            return k, frozenset(read_args)
        elif code == 0x16:  # ret a
            return accumulator, frozenset(read_args)
        elif code == 0x07:  # tax
            index = accumulator
        elif code == 0x87:  # txa
            accumulator = index
        else:
            raise ValueError(f"unknown BPF instruction {code:#x}")
    raise ValueError("the filter ran off its end")


def _constants(*programs: list[tuple[int, int, int, int]]) -> set[int]:
    found = {0, 1, _MASK}
    for program in programs:
        for code, _, _, k in program:
            if code & 0x07 in (0x04, 0x05) and code != 0x05:
                found |= {k, (k + 1) & _MASK, (k - 1) & _MASK, ~k & _MASK}
    return found


def _arches(*programs: list[tuple[int, int, int, int]]) -> set[int]:
    known = {AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM}
    named = {k for program in programs for code, _, _, k in program if code == 0x15 and k in known}
    return named | {0}  # and one no filter names


def inputs(*programs: list[tuple[int, int, int, int]]) -> Iterator[tuple[int, int]]:
    """(arch, nr) pairs: every number up to 700 (every architecture here has fewer than 600
    system calls) natively and through the x32 bit, a few beyond, for every architecture the
    filters name and one they do not."""
    numbers = [*range(700), *(n | _X32_BIT for n in range(700)), 0x7FFFFFFF, _MASK]
    for arch in sorted(_arches(*programs)):
        for nr in numbers:
            yield arch, nr


def differences(first: bytes, second: bytes, limit: int = 5) -> list[str]:
    """Where the two filters answer differently (at most ``limit``); empty when they agree on
    every input this oracle makes."""
    a, b = instructions(first), instructions(second)
    constants = sorted(_constants(a, b))
    found: list[str] = []
    for arch, nr in inputs(a, b):
        data = seccomp_data(nr, arch)
        (answer_a, read_a), (answer_b, read_b) = run(a, data), run(b, data)
        cases = [((0,) * 6, answer_a, answer_b)]
        # Each argument either filter read for this call, one at a time.
        for position in sorted(read_a | read_b):
            for value in constants:
                for word in (value, value << 32, value | value << 32):
                    args = tuple(word if i == position else 0 for i in range(6))
                    data = seccomp_data(nr, arch, args)
                    cases.append((args, run(a, data)[0], run(b, data)[0]))
        for args, left, right in cases:
            if left != right:
                found.append(f"arch {arch:#x} nr {nr:#x} args {args}: {left:#x} vs {right:#x}")
                if len(found) >= limit:
                    return found
    return found
