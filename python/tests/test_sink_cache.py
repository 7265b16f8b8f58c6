# posenc.nn.SinkCache (StreamingLLM, Xiao et al. 2023): after any sequence of evictions its keys
# equal the surviving tokens' keys rotated from scratch at their slots (re-rotating), or at their
# places in the stream (not re-rotating); values are the survivors'; bad settings are ValueErrors.
import pytest
import torch

import posenc


def _survivors(n, sinks, window):
    return torch.arange(n) if n <= sinks + window else torch.cat([torch.arange(sinks), torch.arange(n - window, n)])


@pytest.mark.parametrize("heads_dim", [2, 1])
@pytest.mark.parametrize("rerotate", [True, False])
def test_after_evictions_the_cache_equals_the_survivors_rotated_at_their_slots(rerotate, heads_dim):
    torch.manual_seed(4)
    s = posenc.schedule(head_dim=32)
    sinks, window, chunks = 4, 12, [7, 1, 1, 5, 13, 1, 9, 1, 1, 1, 30, 2, 1, 40, 1, 1, 3]
    n, t = sum(chunks), 1 if heads_dim == 2 else 2
    raw_k = torch.randn(2, n, 2, 32) if heads_dim == 2 else torch.randn(2, 2, n, 32)
    raw_v = torch.randn_like(raw_k)
    cache = posenc.nn.SinkCache(sinks, window, schedule=s, heads_dim=heads_dim, rerotate=rerotate)
    at = 0
    for c in chunks:
        k = posenc.apply_rope(raw_k.narrow(t, at, c), schedule=s, positions=cache.positions(c), heads_dim=heads_dim)
        for layer in (0, 1):  # two layers, the same tokens
            keys, values = cache.update(k, raw_v.narrow(t, at, c), layer)
        assert keys.shape[t] == len(cache) and values.shape == keys.shape
        cache.evict()
        at += c
        assert len(cache) == min(at, sinks + window)
    assert cache.evicted == n - sinks - window
    kept = _survivors(n, sinks, window)
    places = torch.arange(len(kept)) if rerotate else kept
    expected = posenc.apply_rope(raw_k.index_select(t, kept), schedule=s, positions=places, heads_dim=heads_dim)
    for layer in (0, 1):
        assert torch.equal(cache.values[layer], raw_v.index_select(t, kept))
        error = (cache.keys[layer] - expected).abs().max().item()
        if rerotate:
            assert 0 < error <= 4e-6, error  # f32: each shift rounds once more (rope_shift.h)
        else:
            assert error == 0  # the keys rotated on entry, untouched


def test_bad_settings_are_value_errors_naming_them():
    s = posenc.schedule(head_dim=16)
    with pytest.raises(ValueError, match=r"sinks must be an int in \[0, 2\^31-1\], got -1"):
        posenc.nn.SinkCache(-1, 8, schedule=s)
    with pytest.raises(ValueError, match=r"window must be an int in \[1, 2\^31-1\], got 0"):
        posenc.nn.SinkCache(4, 0, schedule=s)
    with pytest.raises(ValueError, match="heads_dim must be 1"):
        posenc.nn.SinkCache(4, 8, schedule=s, heads_dim=3)
    cache = posenc.nn.SinkCache(4, 8, schedule=s)
    with pytest.raises(ValueError, match=r"layer must be in \[0, 0\]"):
        cache.update(torch.zeros(1, 2, 1, 16), torch.zeros(1, 2, 1, 16), layer=1)
