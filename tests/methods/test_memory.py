"""State a method may keep: a FIFO queue of past embeddings, and momentum (EMA) updates."""

from __future__ import annotations

import pytest
import torch

from harness.errors import ConfigError
from methods.memory import NegativeQueue, ema_update
from methods.mocose import MoCoSEParams


def test_the_queue_holds_what_was_pushed_oldest_first() -> None:
    queue = NegativeQueue(5, 2)
    assert queue.size == 5 and queue.contents().shape == (0, 2)
    first = torch.arange(6.0).view(3, 2)
    queue.push(first)
    torch.testing.assert_close(queue.contents(), first)
    second = 10 + torch.arange(8.0).view(4, 2)
    queue.push(second)  # 7 rows pushed into 5: the two oldest are gone
    torch.testing.assert_close(queue.contents(), torch.cat([first, second])[2:])
    assert int(queue.filled) == 5 and int(queue.pointer) == 2


def test_a_batch_longer_than_the_queue_keeps_its_last_rows() -> None:
    queue = NegativeQueue(3, 1)
    queue.push(torch.arange(7.0).view(7, 1))
    torch.testing.assert_close(queue.contents(), torch.tensor([[4.0], [5.0], [6.0]]))


def test_pushed_rows_are_detached_copies_in_the_queues_dtype_and_buffers() -> None:
    queue = NegativeQueue(2, 3)
    rows = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
    queue.push(rows * 2)
    assert not queue.contents().requires_grad and queue.contents().dtype == torch.float32
    torch.testing.assert_close(queue.contents(), torch.full((2, 3), 2.0))
    assert set(dict(queue.named_buffers())) == {"rows", "filled", "pointer"} and not list(queue.parameters())
    assert set(queue.state_dict()) == {"rows", "filled", "pointer"}  # saved with a checkpoint


@pytest.mark.parametrize(("size", "dim"), [(0, 4), (4, 0), (-1, 4)])
def test_an_empty_queue_is_refused(size: int, dim: int) -> None:
    with pytest.raises(ValueError, match="queue size and dim must be >= 1"):
        NegativeQueue(size, dim)


def test_ema_moves_the_target_towards_the_online_weights() -> None:
    target, online = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    start = [p.detach().clone() for p in target.parameters()]
    ema_update(target, online, 0.9)
    for t, s, o in zip(target.parameters(), start, online.parameters(), strict=True):
        torch.testing.assert_close(t.detach(), 0.9 * s + 0.1 * o.detach())
    ema_update(target, online, 0.0)  # momentum 0: a copy
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        assert torch.equal(t, o)
    copy = [p.detach().clone() for p in target.parameters()]
    ema_update(target, torch.nn.Linear(3, 2), 1.0)  # momentum 1: unchanged
    assert all(torch.equal(t, c) for t, c in zip(target.parameters(), copy, strict=True))


def test_ema_refuses_a_different_model_and_leaves_the_momentum_to_the_parameters() -> None:
    target = torch.nn.Linear(3, 2)
    with pytest.raises(ValueError):
        ema_update(target, torch.nn.Linear(3, 2, bias=False), 0.5)
    # the one rule for a momentum is its method's parameters' (MoCoSE: [0, 1)), checked once
    with pytest.raises(ConfigError, match=r"^momentum must be in \[0, 1\), got 1.0$"):
        MoCoSEParams(momentum=1.0).validate(None)
    online = torch.nn.Linear(3, 2)
    with torch.no_grad():
        target.weight.fill_(1.0)
        online.weight.fill_(2.0)
    ema_update(target, online, 1.5)  # a step does not check it again: 1.5 * 1 - 0.5 * 2
    assert torch.equal(target.weight.detach(), torch.full((2, 3), 0.5))


def test_the_queue_keeps_its_counts_on_the_host_and_reads_them_again_after_a_load() -> None:
    from harness.run.step import host_reads

    queue = NegativeQueue(5, 2)
    queue.push(torch.ones(3, 2))
    assert host_reads(lambda: (queue.push(torch.ones(4, 2)), queue.contents())) == []
    state = {k: v.clone() for k, v in queue.state_dict().items()}
    fresh = NegativeQueue(5, 2)
    fresh.load_state_dict(state)  # the buffers changed under the host's copy: read once
    torch.testing.assert_close(fresh.contents(), queue.contents())
    assert int(fresh.pointer) == 2 and int(fresh.filled) == 5
