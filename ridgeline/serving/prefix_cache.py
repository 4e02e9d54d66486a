"""Automatic prefix caching as vLLM V1 runs it, for the serving simulator.

A prompt's blocks are named by a hash chain: a block's key hashes the key of the block
before it with its own content id, so two prompts share a block only if they share
everything up to and including it (vLLM's ``hash_block_tokens``,
``vllm/v1/core/kv_cache_utils.py``; docs.vllm.ai, "Automatic Prefix Caching"). Content ids
are the trace's (Mooncake's ``hash_ids``, one per 512 tokens) or the shared-prefix
generator's (one per KV block); a cached unit is one id's tokens, ``blocks`` KV blocks, and
only whole units are cached.

A unit referenced by a running request is in use. When the last request holding it leaves
it stays cached but evictable, queued least recently freed first; a request's units are
queued last first, so a prefix loses its tail before its head (vLLM frees a request's
blocks in reverse order). The cache shares the paged KV capacity: the server's
``used`` blocks (private blocks and in-use units, each counted once) plus the evictable
units never exceed it, the least recently freed going first when a step needs room.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


def chain_keys(ids: np.ndarray, whole: int) -> list[int]:
    """Keys of the first ``whole`` units of a prompt whose unit content ids are ``ids``."""
    keys, key = [], 0
    for content in ids[:whole].tolist():
        key = hash((key, content))
        keys.append(key)
    return keys


class PrefixCache:
    """Cached units: those in use with their reference counts, the evictable in LRU order."""

    def __init__(self, tokens: int, blocks: int):
        self.tokens = tokens  # tokens per unit
        self.blocks = blocks  # KV blocks per unit
        self.refs: dict[int, int] = {}  # in use: key -> running requests holding it
        self.free: OrderedDict[int, None] = OrderedDict()  # evictable, least recently freed first

    def match(self, keys: list[int]) -> tuple[int, int]:
        """The leading units of ``keys`` that are cached, and how many of them are in use."""
        found = live = 0
        for key in keys:
            if key in self.refs:
                live += 1
            elif key not in self.free:
                break
            found += 1
        return found, live

    def take(self, keys: list[int]) -> None:
        """A request holds the cached units ``keys`` (found by :meth:`match`)."""
        for key in keys:
            if key in self.free:
                del self.free[key]
                self.refs[key] = 1
            else:
                self.refs[key] += 1

    def add(self, key: int) -> bool:
        """A request computed unit ``key``: cache it, held by that request, unless a copy
        is already cached (two requests computing it at once keep their own)."""
        if key in self.refs or key in self.free:
            return False
        self.refs[key] = 1
        return True

    def drop(self, keys: list[int]) -> int:
        """A request leaves: it stops holding ``keys``; returns how many are no longer in use."""
        freed = 0
        for key in reversed(keys):
            if self.refs[key] == 1:
                del self.refs[key]
                self.free[key] = None
                freed += 1
            else:
                self.refs[key] -= 1
        return freed

    def fit(self, room: int) -> None:
        """Evict the least recently freed units until the evictable fit in ``room`` KV blocks."""
        while self.free and len(self.free) * self.blocks > room:
            self.free.popitem(last=False)


def cacheable_units(prompt: np.ndarray, hash_ids, tokens: int) -> np.ndarray:
    """Per request, its prompt's whole units that have an id (a partial last one is not cached)."""
    counts = np.fromiter((len(ids) for ids in hash_ids), dtype=np.int64, count=len(hash_ids))
    return np.minimum(counts, prompt // tokens)
