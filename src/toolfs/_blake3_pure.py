"""BLAKE3 (hash mode, 32-byte output) in pure Python: the fallback that keeps ``blake3``
versions checkable in a process without the ``blake3`` package.

toolfs never *makes* a ``blake3`` version without the package (:func:`toolfs.versions.
digest_kind`); this code only checks one made elsewhere (a ledger snapshot restored from a
process that had it). It is slow -- tens of milliseconds per 64 KiB, seconds at the 10 MiB
whole-file cap -- but O(size) and exact: ``tests/contract/test_versions_and_digests.py``
compares it with the package on inputs around every chunk and tree boundary.

Written from the BLAKE3 specification (compression function, chunk chaining, binary tree
of chaining values with the largest power-of-two left subtree).
"""

from __future__ import annotations

import struct

_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
       0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
_PERMUTATION = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT = 1, 2, 4, 8
_CHUNK_LEN, _BLOCK_LEN = 1024, 64
_MASK = 0xFFFFFFFF
_WORDS = struct.Struct("<16I")


def _schedules() -> tuple[tuple[int, ...], ...]:
    """The message word order of each of the 7 rounds (permuted after every round)."""
    order = tuple(range(16))
    rounds = [order]
    for _ in range(6):
        order = tuple(order[p] for p in _PERMUTATION)
        rounds.append(order)
    return tuple(rounds)


_SCHEDULES = _schedules()


def _compress(cv: tuple[int, ...], m: tuple[int, ...], counter: int, block_len: int,
              flags: int) -> tuple[int, ...]:
    """The compression function; returns the first 8 output words (a chaining value)."""
    v = [*cv, *_IV[:4], counter & _MASK, (counter >> 32) & _MASK, block_len, flags]

    def g(a: int, b: int, c: int, d: int, x: int, y: int) -> None:
        va, vb, vc, vd = v[a], v[b], v[c], v[d]
        va = (va + vb + x) & _MASK
        vd ^= va
        vd = ((vd >> 16) | (vd << 16)) & _MASK
        vc = (vc + vd) & _MASK
        vb ^= vc
        vb = ((vb >> 12) | (vb << 20)) & _MASK
        va = (va + vb + y) & _MASK
        vd ^= va
        vd = ((vd >> 8) | (vd << 24)) & _MASK
        vc = (vc + vd) & _MASK
        vb ^= vc
        vb = ((vb >> 7) | (vb << 25)) & _MASK
        v[a], v[b], v[c], v[d] = va, vb, vc, vd

    for s in _SCHEDULES:
        g(0, 4, 8, 12, m[s[0]], m[s[1]])
        g(1, 5, 9, 13, m[s[2]], m[s[3]])
        g(2, 6, 10, 14, m[s[4]], m[s[5]])
        g(3, 7, 11, 15, m[s[6]], m[s[7]])
        g(0, 5, 10, 15, m[s[8]], m[s[9]])
        g(1, 6, 11, 12, m[s[10]], m[s[11]])
        g(2, 7, 8, 13, m[s[12]], m[s[13]])
        g(3, 4, 9, 14, m[s[14]], m[s[15]])
    return tuple(v[i] ^ v[i + 8] for i in range(8))


def _chunk(data: memoryview, index: int, root: bool) -> tuple[int, ...]:
    """The chaining value of one chunk (at most 1024 bytes; the root output if ``root``)."""
    cv: tuple[int, ...] = _IV
    blocks = max(1, -(-len(data) // _BLOCK_LEN))
    for i in range(blocks):
        block = bytes(data[i * _BLOCK_LEN:(i + 1) * _BLOCK_LEN])
        flags = _CHUNK_START if i == 0 else 0
        if i == blocks - 1:
            flags |= _CHUNK_END | (_ROOT if root else 0)
        words = _WORDS.unpack(block.ljust(_BLOCK_LEN, b"\0"))
        cv = _compress(cv, words, index, len(block), flags)
    return cv


def _subtree(data: memoryview, first_chunk: int, root: bool) -> tuple[int, ...]:
    if len(data) <= _CHUNK_LEN:
        return _chunk(data, first_chunk, root)
    chunks = -(-len(data) // _CHUNK_LEN)
    left_chunks = 1 << ((chunks - 1).bit_length() - 1)  # largest power of two < chunks
    split = left_chunks * _CHUNK_LEN
    left = _subtree(data[:split], first_chunk, False)
    right = _subtree(data[split:], first_chunk + left_chunks, False)
    return _compress(_IV, left + right, 0, _BLOCK_LEN, _PARENT | (_ROOT if root else 0))


def blake3_hex(data: bytes) -> str:
    """The BLAKE3 digest of ``data`` (32 bytes), as lowercase hex."""
    return struct.pack("<8I", *_subtree(memoryview(data), 0, True)).hex()
