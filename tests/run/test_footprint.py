"""A method's footprint, measured on a stand-in encoder: the rows a step encodes with and without
gradient, the encoder copies it holds and the parameters it builds, as the real method on the tiny
encoder has them (the grid's cost and memory estimates read them)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.encoder.training_encode import TrainingEncode
from harness.run.footprint import footprint
from methods import REGISTRY, build_params
from tests.helpers import make_method

pytestmark = pytest.mark.usefixtures("single_thread")


class RowCountingEncode(TrainingEncode):
    """TrainingEncode that counts the rows each encoder call computes, with and without gradient."""

    def __init__(self, encoder) -> None:
        super().__init__(encoder)
        self.rows = 0
        self.no_grad_rows = 0

    def _call(self, batch, dropout, encoder, embeddings, tokens):
        out = super()._call(batch, dropout, encoder, embeddings, tokens)
        if out.requires_grad:
            self.rows += int(batch["input_ids"].shape[0])
        else:
            self.no_grad_rows += int(batch["input_ids"].shape[0])
        return out


ROW_CASES: list[tuple[str, dict[str, Any]]] = [
    ("simcse", {}),
    ("whitenedcse", {"num_groups": 16}),
    ("whitenedcse", {"num_groups": 16, "num_positives": 4}),
    ("whitenedcse", {"num_groups": 16, "positive_source": "sgw"}),
    ("simcsepp", {}),
    ("simcsepp", {"off_dropout": False, "m": 1.0}),
    ("noise_probe", {"variant": "pos_minus_noise", "k_samples": 3}),
    ("noise_probe", {"variant": "neg_minus_noise", "k_samples": 2, "k_independent": True}),
    ("noise_probe", {"variant": "neg_plus_noise"}),
    ("barlow_probe", {"padding_rows": 8}),
]


SMOKE_CASES = [(name, dict(p)) for name, cls in REGISTRY.items() for p in cls.smoke_params]


@pytest.mark.parametrize(("name", "overrides"), ROW_CASES + SMOKE_CASES)
def test_the_footprint_counts_what_a_step_encodes(encoder, sents_batch, name, overrides):
    """The grid's cost and memory estimates count the measured footprint's rows with and without
    gradient per sentence (on a one-layer stand-in, four sentences): a real step of the tiny encoder
    on another batch encodes the same per sentence."""
    method = make_method(name, encoder.hidden_size, **overrides)
    method.bind(encoder)
    counting = RowCountingEncode(encoder)
    method.compute_loss(counting, sents_batch, step=1)
    b = sents_batch["input_ids"].shape[0]
    measured = footprint(name, method.params, encoder.hidden_size)
    assert counting.rows == measured.rows * b
    assert counting.no_grad_rows == measured.no_grad_rows * b


@pytest.mark.parametrize(("name", "overrides"), SMOKE_CASES)
def test_the_footprint_counts_the_copies_bind_holds(encoder, name, overrides):
    """The memory estimate adds the footprint's whole encoder copies: after ``bind`` on the tiny
    encoder, the method's new trainable and frozen weights are within one copy below the count (a
    share of a copy, such as key layers sharing the embedding layer, counts as one) and not above it
    by more than small heads built in ``bind``."""
    method = make_method(name, encoder.hidden_size, **overrides)
    own = sum(p.numel() for p in method.trainable_parameters())
    method.bind(encoder)
    whole = sum(p.numel() for p in encoder.parameters())
    trained = (sum(p.numel() for p in method.trainable_parameters()) - own) / whole
    frozen = (sum(p.numel() for p in method.parameters()) - own) / whole - trained
    measured = footprint(name, method.params, encoder.hidden_size)
    assert measured.trained_copies - 1 < trained <= measured.trained_copies + 0.25, (trained, measured)
    assert measured.frozen_copies - 1 < frozen <= measured.frozen_copies + 0.25, (frozen, measured)


@pytest.mark.parametrize(("name", "overrides"), ROW_CASES + SMOKE_CASES)
def test_the_footprint_counts_the_parameters_the_method_builds(encoder, name, overrides):
    """The memory estimate adds the method's own trainable parameters (heads, projectors, and those
    ``bind`` builds): the footprint's count, taken on the stand-in encoder, equals those of the real
    method bound to the tiny encoder, less its whole trained encoder copies (counted apart)."""
    method = make_method(name, encoder.hidden_size, **overrides)
    method.bind(encoder)
    own = sum(p.numel() for p in method.trainable_parameters())
    whole = sum(p.numel() for p in encoder.parameters())
    measured = footprint(name, method.params, encoder.hidden_size)
    assert measured.own_parameters == own - measured.trained_copies * whole


def test_the_footprint_of_the_known_methods() -> None:
    """Values read off the methods' definitions: SimCSE's two views, WhitenedCSE's m positives, the
    noise probe's 2K samples, CT's trained second model, DCLR's frozen complementary model (two
    views without gradient) and MoCoSE's queries and keys with gradient (as released: the keys are not
    detached) and its frozen key encoder; MoCo's keys without gradient under key_gradient = "none"."""
    d = 32
    expect = {
        ("simcse", ()): (2.0, 0.0, 0, 0),
        ("whitenedcse", (("num_groups", 8), ("num_positives", 4))): (4.0, 0.0, 0, 0),
        ("noise_probe", (("variant", "neg_minus_noise"), ("k_samples", 3))): (6.0, 0.0, 0, 0),
        ("ct", ()): (2.0, 0.0, 1, 0),
        ("dclr", ()): (2.0, 2.0, 0, 1),
        ("mocose", ()): (2.0, 0.0, 0, 1),
        ("mocose", (("key_gradient", "none"),)): (1.0, 1.0, 0, 1),
    }
    for (name, overrides), (rows, no_grad, trained, frozen) in expect.items():
        measured = footprint(name, build_params(name, dict(overrides)), d)
        got = (measured.rows, measured.no_grad_rows, measured.trained_copies, measured.frozen_copies)
        assert got == (rows, no_grad, trained, frozen), name
    assert footprint("simcse", build_params("simcse", {"mlp": False}), d).own_parameters == 0
    assert footprint("simcse", build_params("simcse", {}), d).own_parameters == d * d + d  # the MLP head


def test_the_footprint_cache_keeps_what_it_measured_for_the_next_process(tmp_path, monkeypatch) -> None:
    """A dry run measures each footprint once per code version: a second cache over the same runs
    folder reads them without measuring; changed code misses; a missing runs folder is not created."""
    import harness.run.footprint as module

    params = build_params("simcse", {})
    first = module.FootprintCache(tmp_path)
    measured = first.get("simcse", params, 32)
    assert measured == footprint("simcse", params, 32)
    first.save()
    assert first.path.is_file() and first.path.parent.parent == tmp_path

    def no_measuring(*args: Any) -> Any:
        raise AssertionError("measured although cached")

    monkeypatch.setattr(module, "footprint", no_measuring)
    assert module.FootprintCache(tmp_path).get("simcse", params, 32) == measured
    with pytest.raises(AssertionError, match="measured although cached"):
        module.FootprintCache(tmp_path).get("simcse", params, 64)  # another width: not cached
    monkeypatch.setattr(module, "code_digest", lambda: "0" * 64)
    with pytest.raises(AssertionError, match="measured although cached"):
        module.FootprintCache(tmp_path).get("simcse", params, 32)  # other code: not cached

    monkeypatch.undo()
    missing = module.FootprintCache(tmp_path / "no-runs")
    missing.get("simcse", params, 32)
    missing.save()
    assert not (tmp_path / "no-runs").exists()


def test_a_footprint_cache_file_not_written_by_it_is_measured_again(tmp_path) -> None:
    from harness.run.footprint import FootprintCache

    params = build_params("simcse", {})
    cache = FootprintCache(tmp_path)
    cache.path.parent.mkdir(parents=True)
    key = f"simcse|{params!r}|32"
    cache.path.write_text(json.dumps({key: {"rows": 9.0}}))
    assert FootprintCache(tmp_path).get("simcse", params, 32) == footprint("simcse", params, 32)
    cache.path.write_text("not json")
    assert FootprintCache(tmp_path).get("simcse", params, 32).rows == 2.0
