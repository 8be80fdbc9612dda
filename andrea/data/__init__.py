"""Data: tokenizer, token shards, corpora (stdlib | text | hf | shards), loader.

prepared = prepare_data(DataConfig(source="stdlib"), vocab_size=8449)
check_split_sizes(prepared, batch_size, seq_len)
loader = TokenLoader(prepared.train_shards, batch_size, seq_len, seed, rank, world_size)
x, y = loader.next_batch()
val = ValidationSet(prepared.val_shards, seq_len, max_tokens)   # the same for every run
for x, y in val.batches(batch_size, rank, world_size): ...
"""

from andrea.data.config import SOURCES, DataConfig, resolve_cache_dir, validate_data_config
from andrea.data.loader import TokenLoader, ValidationSet, val_batches
from andrea.data.prepare import (
    PreparedData,
    check_split_sizes,
    find_prepared,
    n_windows,
    prepare_data,
)
from andrea.data.shards import read_header, read_shard, write_shard
from andrea.data.tokenizer import EOT, load_tokenizer, train_tokenizer

__all__ = [
    "SOURCES",
    "DataConfig",
    "EOT",
    "PreparedData",
    "TokenLoader",
    "ValidationSet",
    "check_split_sizes",
    "find_prepared",
    "load_tokenizer",
    "n_windows",
    "prepare_data",
    "read_header",
    "read_shard",
    "resolve_cache_dir",
    "train_tokenizer",
    "val_batches",
    "validate_data_config",
    "write_shard",
]
