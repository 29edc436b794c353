"""Group / shuffled group whitening and running PCA/ZCA."""

from __future__ import annotations

import pytest
import torch

from harness.errors import TrainingError
from methods.checks import deferred_checks
from methods.whitening import (
    RunningWhitening,
    describe_groups,
    group_sizes,
    group_split,
    group_whiten,
    inverse_permutation,
    permute_channels,
    random_permutations,
    whiten_groups,
)


def correlated(seed: int, n: int, d: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    mix = torch.randn(d, d, generator=g, dtype=torch.float64)
    return x @ mix + 3.0


def group_covs(x: torch.Tensor, num_groups: int) -> torch.Tensor:
    n, d = x.shape
    xc = x - x.mean(0)
    g = xc.view(n, num_groups, d // num_groups).transpose(0, 1)
    return g.transpose(1, 2) @ g / n


def test_each_group_has_identity_covariance():
    x = correlated(0, 64, 12)
    out, evals = group_whiten(x, num_groups=3)
    assert out.shape == x.shape and out.dtype == torch.float64
    eye = torch.eye(4, dtype=torch.float64).expand(3, 4, 4)
    torch.testing.assert_close(group_covs(out, 3), eye, atol=1e-4, rtol=0)
    torch.testing.assert_close(out.mean(0), torch.zeros(12, dtype=torch.float64), atol=1e-10, rtol=0)
    assert evals.shape == (3, 4)


def test_groups_are_whitened_independently_in_one_batch():
    x = correlated(1, 32, 8)
    out, _ = group_whiten(x, num_groups=2)
    first, _ = group_whiten(x[:, :4], num_groups=1)
    second, _ = group_whiten(x[:, 4:], num_groups=1)
    torch.testing.assert_close(out, torch.cat([first, second], dim=1))


def test_blocks_use_their_own_statistics():
    x = correlated(2, 20, 8).view(2, 10, 8)
    out, _ = group_whiten(x, num_groups=4)
    torch.testing.assert_close(out[1], group_whiten(x[1], num_groups=4)[0])


def test_group_wider_than_batch_is_finite_with_ridge_and_raises_without():
    x = correlated(3, 4, 16)
    out, _ = group_whiten(x, num_groups=1, eps=1e-5)
    assert torch.isfinite(out).all()
    with pytest.raises(TrainingError, match=r"step 7: .*block 0, group 0"):
        group_whiten(x, num_groups=1, eps=0.0, step=7)


def test_non_finite_input_raises_training_error_with_step():
    x = correlated(4, 8, 4)
    x[3, 2] = float("nan")
    with pytest.raises(TrainingError, match=r"step 11: .*non-finite"):
        group_whiten(x, num_groups=2, step=11)


def test_more_groups_than_channels_have_no_split():
    # a run's count is checked against its width by WhitenedCSEParams.validate (test_whitenedcse)
    for groups in (13, 0):
        with pytest.raises(ValueError, match=rf"^cannot split d=12 channels into {groups} groups \(1\.\.d"):
            group_whiten(correlated(5, 8, 12), num_groups=groups)


def test_a_split_made_once_whitens_as_the_count_does():
    split = group_split(10, 4)
    assert split.sizes == (3, 3, 2, 2) and split.num_groups == 4
    assert split.runs == ((0, 2, 3, 0), (2, 2, 2, 6))  # (first group, groups, channels, first channel)
    x = correlated(8, 32, 10)
    out, evals = whiten_groups(x, split)
    expected, expected_evals = group_whiten(x, num_groups=4)
    assert torch.equal(out, expected) and torch.equal(evals, expected_evals)


def test_uneven_groups_split_as_evenly_as_possible_and_each_is_white():
    # 10 channels in 4 groups: 3, 3, 2, 2 contiguous channels; each group is ZCA-whitened on its own.
    assert group_sizes(10, 4) == [3, 3, 2, 2]
    assert describe_groups(10, 4) == "2 groups of 3 and 2 of 2 channels"
    x = correlated(7, 64, 10)
    out, evals = group_whiten(x, num_groups=4, eps=0.0)
    bounds = [(0, 3), (3, 6), (6, 8), (8, 10)]
    for lo, hi in bounds:
        expected, _ = group_whiten(x[:, lo:hi], num_groups=1, eps=0.0)
        torch.testing.assert_close(out[:, lo:hi], expected)
        cov = out[:, lo:hi].T @ out[:, lo:hi] / x.shape[0]
        torch.testing.assert_close(cov, torch.eye(hi - lo, dtype=cov.dtype), atol=1e-6, rtol=0)
    assert evals.shape == (4, 3)
    assert torch.isinf(evals[2:, 2]).all() and torch.isfinite(evals[:2]).all()


def test_uneven_groups_with_shuffle_undo_the_permutation():
    x = correlated(8, 32, 10)
    perm = random_permutations(1, 10)
    shuffled, _ = group_whiten(x, num_groups=3, perm=perm)
    direct, _ = group_whiten(x[:, perm[0]], num_groups=3)
    torch.testing.assert_close(shuffled, direct[:, inverse_permutation(perm)[0]])


def test_inverse_permutation_restores_channel_order():
    x = correlated(6, 5, 12).unsqueeze(0).repeat(3, 1, 1)
    torch.manual_seed(0)
    perm = random_permutations(3, 12)
    assert all(sorted(p.tolist()) == list(range(12)) for p in perm)
    shuffled = permute_channels(x, perm)
    assert not torch.equal(shuffled, x)
    torch.testing.assert_close(permute_channels(shuffled, inverse_permutation(perm)), x)


def test_shuffled_differs_from_plain_but_whitens_each_permuted_group():
    x = correlated(7, 64, 12)
    torch.manual_seed(1)
    perm = random_permutations(1, 12)
    plain, _ = group_whiten(x, num_groups=3)
    shuffled, _ = group_whiten(x, num_groups=3, perm=perm)
    assert not torch.allclose(plain, shuffled)
    # channels back in the original order: output column j belongs to input column j ...
    torch.testing.assert_close(shuffled, group_whiten(x[:, perm[0]], 3)[0][:, inverse_permutation(perm)[0]])
    # ... and the groups of the permuted channels are white
    eye = torch.eye(4, dtype=torch.float64).expand(3, 4, 4)
    torch.testing.assert_close(group_covs(shuffled[:, perm[0]], 3), eye, atol=1e-4, rtol=0)


def test_identity_permutation_is_plain_group_whitening():
    x = correlated(8, 16, 8)
    ident = torch.arange(8).unsqueeze(0)
    torch.testing.assert_close(group_whiten(x, 2, perm=ident)[0], group_whiten(x, 2)[0])


def test_float32_in_float32_out():
    out, _ = group_whiten(correlated(9, 16, 8).float(), 4)
    assert out.dtype == torch.float32


def test_stop_gradient_treats_w_as_constant():
    x = correlated(10, 16, 8).requires_grad_(True)
    out, _ = group_whiten(x, 2, grad="stop")
    weights = torch.randn(16, 8, dtype=torch.float64)
    (gx,) = torch.autograd.grad((out * weights).sum(), x)
    # reference: centre with gradient, W computed from detached statistics
    xc = x - x.mean(0)
    with torch.no_grad():
        w = []
        for g in range(2):
            cov = group_covs(x.detach(), 2)[g] + 1e-5 * torch.eye(4, dtype=torch.float64)
            lam, u = torch.linalg.eigh(cov)
            w.append(u @ torch.diag(lam.rsqrt()) @ u.T)
    ref = torch.cat([xc[:, :4] @ w[0], xc[:, 4:] @ w[1]], dim=1)
    (gref,) = torch.autograd.grad((ref * weights).sum(), x)
    torch.testing.assert_close(gx, gref)
    out_full, _ = group_whiten(x, 2, grad="full")
    (gfull,) = torch.autograd.grad((out_full * weights).sum(), x)
    assert torch.isfinite(gfull).all() and not torch.allclose(gfull, gx)


@pytest.mark.parametrize("kind", ["zca", "pca"])
def test_running_whitening_first_step_whitens_the_batch(kind):
    x = correlated(11, 64, 6)
    rw = RunningWhitening(6, kind, momentum=0.9, eps=1e-9)
    out, _ = rw(x)
    xc = out - out.mean(0)
    torch.testing.assert_close(xc.T @ xc / 64, torch.eye(6, dtype=torch.float64), atol=1e-4, rtol=0)
    torch.testing.assert_close(rw.running_mean, x.mean(0))


def test_running_estimates_use_momentum():
    x1, x2 = correlated(12, 32, 4), correlated(13, 32, 4) * 2
    rw = RunningWhitening(4, "zca", momentum=0.9)
    rw(x1)
    rw(x2)
    torch.testing.assert_close(rw.running_mean, 0.9 * x1.mean(0) + 0.1 * x2.mean(0))
    c1 = (x1 - x1.mean(0)).T @ (x1 - x1.mean(0)) / 32
    c2 = (x2 - x2.mean(0)).T @ (x2 - x2.mean(0)) / 32
    torch.testing.assert_close(rw.running_cov, 0.9 * c1 + 0.1 * c2)


def test_zca_is_symmetric_and_pca_is_not_rotated_back():
    x = correlated(14, 64, 5)
    zca, pca = RunningWhitening(5, "zca"), RunningWhitening(5, "pca")
    out_z, _ = zca(x)
    out_p, _ = pca(x)
    # both white; they differ by a rotation, and PCA's first column carries the top direction
    assert not torch.allclose(out_z, out_p)
    torch.testing.assert_close(out_z.norm(dim=1), out_p.norm(dim=1))


def test_running_whitening_previous_statistics_follow_eq13() -> None:
    g = torch.Generator().manual_seed(3)
    x1 = torch.randn(32, 3, generator=g, dtype=torch.float64)
    x2 = torch.randn(32, 3, generator=g, dtype=torch.float64) * 2 + 1
    current = RunningWhitening(3, "zca", momentum=0.5, eps=0.0)
    previous = RunningWhitening(3, "zca", momentum=0.5, eps=0.0, stats="previous")
    out_c1, _ = current(x1)
    out_p1, _ = previous(x1)
    torch.testing.assert_close(out_c1, out_p1)  # the first batch uses its own statistics either way
    out_p2, _ = previous(x2)
    # batch 2 is whitened with batch 1's statistics (the running estimate before batch 2)
    mu1 = x1.mean(0)
    cov1 = (x1 - mu1).T @ (x1 - mu1) / 32
    evals, evecs = torch.linalg.eigh(cov1)
    w1 = evecs @ torch.diag(evals.rsqrt()) @ evecs.T
    torch.testing.assert_close(out_p2, (x2 - mu1) @ w1)
    # and both modules hold the same running estimates afterwards (0.5 * batch 1 + 0.5 * batch 2)
    current(x2)
    torch.testing.assert_close(previous.running_mean, current.running_mean)
    torch.testing.assert_close(previous.running_cov, current.running_cov)
    torch.testing.assert_close(previous.running_mean, 0.5 * mu1 + 0.5 * x2.mean(0))


def test_in_the_training_step_the_checks_stay_on_the_device_and_name_what_is_wrong():
    x = correlated(4, 8, 4)
    x[3, 2] = float("nan")
    with deferred_checks() as checks:
        out, _ = group_whiten(x, num_groups=2, step=11)  # no raise: the loop reads the checks later
    assert out.shape == x.shape and len(checks) == 2
    first = checks[0]
    assert first.text(first.numbers.tolist())[0] == (
        "group whitening got 1 non-finite input values (the first at block 0, row 3, channel 2)"
    )
    with deferred_checks() as checks:
        group_whiten(correlated(3, 4, 16), num_groups=1, eps=0.0, step=7)
    singular = [c for c in checks if c.numbers[0] > 0]
    message, note = singular[0].text(singular[0].numbers.tolist())
    assert "covariance of block 0, group 0 is singular or non-finite" in message
    assert note.startswith("eigenvalues of block 0, group 0: [")
    with deferred_checks() as checks:
        rw = RunningWhitening(4, "zca")
        rw(torch.full((6, 4), float("inf")))
    assert checks[0].text(checks[0].numbers.tolist())[0] == "zca whitening got 24 non-finite input values"
