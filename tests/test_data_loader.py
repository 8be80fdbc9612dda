import json

import numpy as np
import pytest
import torch

from andrea.data import TokenLoader, val_batches, write_shard

T = 8


@pytest.fixture
def shards(tmp_path):
    # token value = global position, so every window is identifiable; windows never cross shards
    paths, start = [], 0
    for i, n in enumerate([8 * T + 1, 5 * T + 3, 11 * T + 1]):
        p = tmp_path / f"train_{i:06d}.bin"
        write_shard(p, np.arange(start, start + n) % 65536)
        paths.append(p)
        start += n
    return paths  # 8 + 5 + 11 = 24 windows


def batches(loader, n):
    return [loader.next_batch() for _ in range(n)]


def test_shapes_shift_and_memmap(shards):
    loader = TokenLoader(shards, batch_size=3, seq_len=T, seed=0)
    assert loader.n_windows == 24 and loader.batches_per_epoch == 8
    assert all(isinstance(t, np.memmap) for t in loader.windows.tokens)
    x, y = loader.next_batch()
    assert x.shape == y.shape == (3, T) and x.dtype == y.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert torch.equal(y[:, -1], x[:, -1] + 1)  # consecutive positions: one contiguous window


def test_epoch_covers_every_window_once_then_reshuffles(shards):
    loader = TokenLoader(shards, batch_size=4, seq_len=T, seed=1)
    first = torch.cat([x[:, 0] for x, _ in batches(loader, 6)])
    second = torch.cat([x[:, 0] for x, _ in batches(loader, 6)])
    assert loader.epoch == 1
    assert len(set(first.tolist())) == 24 and set(first.tolist()) == set(second.tolist())
    assert not torch.equal(first, second)


def test_deterministic_given_seed(shards):
    a = batches(TokenLoader(shards, 4, T, seed=7), 10)
    b = batches(TokenLoader(shards, 4, T, seed=7), 10)
    c = batches(TokenLoader(shards, 4, T, seed=8), 10)
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1]) for p, q in zip(a, b))
    assert not all(torch.equal(p[0], q[0]) for p, q in zip(a, c))


@pytest.mark.parametrize("k", [0, 3, 5, 6, 13])  # includes epoch boundaries (6 batches/epoch)
def test_exact_resume(shards, k):
    ref = TokenLoader(shards, 4, T, seed=3)
    batches(ref, k)
    state = json.loads(json.dumps(ref.state_dict()))  # survives a checkpoint as plain data
    expected = batches(ref, 8)
    resumed = TokenLoader(shards, 4, T, seed=3)
    resumed.load_state_dict(state)
    got = batches(resumed, 8)
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1]) for p, q in zip(expected, got))


def test_rank_slices_form_the_single_process_batch(shards):
    # the DDP-equivalence contract: world_size=2 with B/2 per rank == world_size=1 with B
    single = TokenLoader(shards, 6, T, seed=5)
    ranks = [TokenLoader(shards, 3, T, seed=5, rank=r, world_size=2) for r in range(2)]
    for _ in range(10):  # 4 batches per epoch: crosses two epoch boundaries
        x, y = single.next_batch()
        parts = [rk.next_batch() for rk in ranks]
        assert torch.equal(torch.cat([p[0] for p in parts]), x)
        assert torch.equal(torch.cat([p[1] for p in parts]), y)
    # resuming with another world_size but the same global batch continues identically
    state = ranks[0].state_dict()
    again = TokenLoader(shards, 6, T, seed=5)
    again.load_state_dict(state)
    assert torch.equal(again.next_batch()[0], single.next_batch()[0])


def test_resume_mismatch_is_refused(shards):
    state = TokenLoader(shards, 4, T, seed=3).state_dict()
    with pytest.raises(ValueError, match="seed=3 but this loader has seed=4"):
        TokenLoader(shards, 4, T, seed=4).load_state_dict(state)
    with pytest.raises(ValueError, match="global_batch=4 but this loader has global_batch=2"):
        TokenLoader(shards, 2, T, seed=3).load_state_dict(state)


def test_errors(shards):
    with pytest.raises(
        ValueError, match="24 windows .* fewer than one batch of batch_size\\*world_size=25"
    ):
        TokenLoader(shards, 25, T, seed=0)
    with pytest.raises(ValueError, match="rank=2"):
        TokenLoader(shards, 2, T, seed=0, rank=2, world_size=2)
    with pytest.raises(ValueError, match="no token shards"):
        TokenLoader([], 2, T, seed=0)


def test_val_batches_fixed_and_spread(shards):
    a = val_batches(shards, 4, T, max_batches=3)
    b = val_batches(shards, 4, T, max_batches=3)
    assert len(a) == 3
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1]) for p, q in zip(a, b))
    starts = torch.cat([x[:, 0] for x, _ in a]).tolist()
    assert starts == sorted(starts) and len(set(starts)) == 12
    assert starts[0] == 0 and starts[-1] > 11 * T * 2  # spread over the split, not its head
    assert len(val_batches(shards, 4, T, max_batches=100)) == 6  # capped by what exists
    assert len(val_batches(shards, 4, T)) == 6
    halves = [val_batches(shards, 2, T, 3, rank=r, world_size=2) for r in range(2)]
    for i in range(3):
        assert torch.equal(torch.cat([halves[0][i][0], halves[1][i][0]]), a[i][0])
    with pytest.raises(ValueError, match="validation shards hold 24 windows"):
        val_batches(shards, 30, T, 1)


def test_validation_set_is_one_fixed_list_whatever_the_batch_and_world_size(shards):
    from andrea.data import ValidationSet

    val = ValidationSet(shards, T, max_tokens=7 * T)  # 7 of the 24 windows, spread evenly
    assert val.n_windows == 7 and val.n_tokens == 7 * T
    assert val.picked.tolist() == [k * 24 // 7 for k in range(7)]

    def starts(batch_size, world_size):
        per_rank = [
            [int(s) for x, _ in val.batches(batch_size, r, world_size) for s in x[:, 0]]
            for r in range(world_size)
        ]
        return per_rank

    one = starts(4, 1)[0]
    assert len(one) == 7 and one == sorted(one) and len(set(one)) == 7
    for batch_size in (1, 2, 3, 4, 8):
        assert starts(batch_size, 1)[0] == one
        for world_size in (2, 3):
            ranks = starts(batch_size, world_size)
            assert sum(ranks, []) == one  # disjoint slices that cover the list, in rank order
            assert max(map(len, ranks)) - min(map(len, ranks)) <= 1
    shapes = [x.shape for x, _ in val.batches(4)]
    assert shapes == [(4, T), (3, T)]  # the last batch is shorter: no window dropped or repeated
    assert ValidationSet(shards, T).n_windows == 24  # no limit: the whole split
    assert ValidationSet(shards, T, max_tokens=10**9).n_windows == 24  # capped by the split
    with pytest.raises(ValueError, match="no validation window"):
        ValidationSet(shards, T, max_tokens=T - 1)
