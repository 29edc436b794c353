"""MoCoSE: the queue loss against a loop, the momentum schedule and updates, the FGSM noise, and the
reduction to in-batch InfoNCE (momentum 0, no queue, no noise, no heads); each released switch
against the released training step written as a loop (xbdxwyh/mocose)."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from methods import build_params
from methods.base import encoder_parts
from methods.losses import info_nce
from methods.memory import NegativeQueue
from methods.mocose import MoCoSE, MoCoSEParams, NewestFirstQueue, queue_info_nce
from tests.helpers import cos, no_dropout

GRID = [(b, d, m, tau) for b in (2, 5) for d in (4, 12) for m in (0, 3) for tau in (0.05, 1.0)]


def ref_queue_nce(q, k, queue, tau) -> float:
    total = 0.0
    for i in range(len(q)):
        den = sum(math.exp(cos(q[i], kj) / tau) for kj in k) + sum(
            math.exp(cos(q[i], r) / tau) for r in queue
        )
        total += -math.log(math.exp(cos(q[i], k[i]) / tau) / den)
    return total / len(q)


@pytest.mark.parametrize(("b", "d", "m", "tau"), GRID)
def test_queue_info_nce_matches_the_loop_reference(b: int, d: int, m: int, tau: float) -> None:
    gen = torch.Generator().manual_seed(b * 10 + d + m)
    q, k, queue = (torch.randn(n, d, generator=gen, dtype=torch.float64) for n in (b, b, m))
    expected = ref_queue_nce(q.tolist(), k.tolist(), queue.tolist(), tau)
    assert queue_info_nce(q, k, queue, tau).item() == pytest.approx(expected, rel=1e-9)


def test_the_decay_rises_from_m_to_one_on_a_cosine() -> None:
    p = MoCoSEParams()
    assert p.decay(0) == pytest.approx(0.85)
    assert p.decay(p.momentum_steps // 2) == pytest.approx(1 - 0.15 / 2)
    assert p.decay(p.momentum_steps) == pytest.approx(1.0)
    values = [p.decay(u) for u in range(0, p.momentum_steps, 500)]
    assert values == sorted(values)
    assert MoCoSEParams(momentum_steps=0).decay(1234) == 0.85


@pytest.fixture(scope="module")
def batch():
    enc = load_encoder("random:tiny", seed=0)
    return enc.tokenize(
        ["a man plays a guitar .", "two dogs run", "the sky is blue today", "hi"], max_length=16
    )


def make(encoder, **overrides) -> MoCoSE:
    method = MoCoSE(MoCoSEParams.from_overrides(overrides), encoder.hidden_size)
    method.bind(encoder)
    return method


class Recording(TrainingEncode):
    def __init__(self, encoder) -> None:
        super().__init__(encoder)
        self.outputs: list[torch.Tensor] = []

    def __call__(self, batch, *, dropout=True, encoder=None, embeddings=None):
        out = super().__call__(batch, dropout=dropout, encoder=encoder, embeddings=embeddings)
        self.outputs.append(out)
        return out


def test_momentum_zero_without_queue_noise_or_heads_is_in_batch_infonce(batch) -> None:
    encoder = load_encoder("random:tiny", seed=1)
    encoder.train()
    method = make(
        encoder, momentum=0.0, momentum_steps=0, queue_size=0, fgsm=0.0, mlp=False, key_gradient="none"
    )
    encode = Recording(encoder)
    out = method.compute_loss(encode, batch, step=1)
    q, k = encode.outputs
    assert q.requires_grad and not k.requires_grad  # key_gradient="none": the key pass has no gradient
    torch.testing.assert_close(out.loss, info_nce(q, k, 0.05))
    # momentum 0: after the step the key encoder is the online encoder
    with torch.no_grad():
        for p in encoder.parameters():
            p.add_(0.01)
    method.after_step(1)
    for a, b in zip(method.key_encoder.parameters(), encoder.parameters(), strict=True):
        assert torch.equal(a, b)


def test_ema_moves_the_layers_and_shares_the_embedding_layer(batch) -> None:
    encoder = load_encoder("random:tiny", seed=1)
    method = make(encoder, momentum_steps=0, queue_size=0, fgsm=0.0)
    key = method.key_encoder
    before = {n: p.detach().clone() for n, p in key.named_parameters()}
    head_before = method.key_pooler.weight.detach().clone()
    assert method.pooler is not None
    with torch.no_grad():
        for p in [*encoder.parameters(), method.pooler.weight]:
            p.add_(1.0)
    method.after_step(1)
    online = dict(encoder.named_parameters())
    for name, p in key.named_parameters():
        if ".encoder." in name:
            torch.testing.assert_close(p, 0.85 * before[name] + 0.15 * online[name])
        elif ".embeddings." in name:
            assert torch.equal(p, online[name])
    torch.testing.assert_close(method.key_pooler.weight, 0.85 * head_before + 0.15 * method.pooler.weight)


def test_the_pooler_starts_from_the_encoders_pooler_and_keys_skip_the_predictor(batch) -> None:
    encoder = load_encoder("random:tiny", seed=2)
    encoder.train()
    method = make(encoder, queue_size=0, fgsm=0.0)
    assert method.pooler is not None
    model: Any = encoder.model
    dense = model.pooler.dense
    assert torch.equal(method.pooler.weight, dense.weight)
    assert set(method.trainable_parameters()).isdisjoint(set(method.key_encoder.parameters()))
    encode = Recording(encoder)
    out = method.compute_loss(encode, batch, step=1)
    assert torch.isfinite(out.loss)
    grads = torch.autograd.grad(out.loss, method.trainable_parameters(), allow_unused=True)
    assert all(g is not None for g in grads)  # pooler, projection and predictor all train


def test_the_queue_starts_random_and_fills_with_keys(batch) -> None:
    encoder = load_encoder("random:tiny", seed=1)
    method = make(encoder, queue_size=6, fgsm=0.0)
    assert method.queue is not None and int(method.queue.filled) == 6
    torch.testing.assert_close(method.queue.contents().norm(dim=1), torch.ones(6))
    empty = make(encoder, queue_size=6, queue_init="empty", fgsm=0.0)
    assert empty.queue is not None and int(empty.queue.filled) == 0
    out = empty.compute_loss(TrainingEncode(encoder), batch, step=1)
    out.loss.backward()
    metrics = empty.after_step(1)
    assert float(metrics["queue_filled"]) == 4.0
    assert empty._keys is not None
    torch.testing.assert_close(empty.queue.contents(), empty._keys)


def test_fgsm_adds_eps_times_the_sign_of_the_previous_steps_gradient(batch) -> None:
    encoder = load_encoder("random:tiny", seed=3)
    encoder.train()
    eps = 0.5
    method = make(encoder, fgsm=eps, queue_size=0)
    edit = method._query_edit()
    assert edit.words is not None
    x = torch.randn(4, 7, encoder.hidden_size)
    rows = torch.arange(4)
    assert torch.equal(edit.words(x, batch["attention_mask"], rows), x)  # no gradient yet: no noise
    torch.manual_seed(0)
    out = method.compute_loss(TrainingEncode(encoder), batch, step=1)
    words = [w for _, w in method._words]
    out.loss.backward()
    (grad,) = [w.grad for w in words]
    assert grad is not None
    method.after_step(1)
    sign = grad.sign()
    assert sign.abs().sum() > 0
    # the next step's rows get x + eps * sign(g), cropped to their width, zero where g had no position
    width = batch["input_ids"].shape[1]
    longer = torch.randn(4, width + 3, encoder.hidden_size)
    noisy = method._query_edit().words(longer, batch["attention_mask"], rows)  # type: ignore[misc]
    torch.testing.assert_close(noisy[:, :width], longer[:, :width] + eps * sign)
    torch.testing.assert_close(noisy[:, width:], longer[:, width:])
    subset = torch.tensor([2, 0])
    part = method._noise(longer[:2, :3], batch["attention_mask"][:2, :3], subset)
    torch.testing.assert_close(part, longer[:2, :3] + eps * sign[subset, :3])


def test_parameters_are_validated() -> None:
    for key, value in (("momentum", 1.0), ("queue_size", -1), ("fgsm", -1.0), ("predictor_layers", 0)):
        with pytest.raises(ConfigError, match=key):
            build_params("mocose", {key: value}).validate()


# -- as released (xbdxwyh/mocose): each switch against the released loop -------------------------------
# MoCoSE as released (xbdxwyh/mocose): each switch against a loop written from the released code.
#
# The reference below is the released training step rebuilt from ``mocose.py`` and the notebook,
# line by line in its order, on copies of the same starting weights: ``MoCoSEModel.forward`` (the
# EMA updates of the target encoder, pooler and projection first, with ``EMA.update``'s cosine decay;
# two calls of the shared online embedding layer, each registering the FGSM gradient hook of
# ``MoCoSEEmbeddings.forward`` and adding ``fgsm_attack``'s noise; the online branch through
# pooler, projection and predictor, the target branch through the EMA copies;
# ``InfoNCEWithQueue``), the optimiser over every parameter with ``requires_grad`` (the notebook
# freezes only the target encoder and target pooler), and ``dequeue_and_enqueue``. Both sides take
# the same plain SGD steps on the same batches, in float64 with every dropout rate at 0, so they
# must agree to rounding: losses, every trained and every EMA weight, and the queue.
#
# Dropout itself is checked by mode: which dropout modules of the key branch are active during the
# key call (``key_dropout``). The queue order is also checked on its own against the released
# ``dequeue_and_enqueue`` with batches that do not divide the queue, and larger than it.

SENTENCES = [
    [
        "a man is playing a guitar on the stage",
        "two dogs are running through the snow",
        "the woman slices a ripe tomato",
        "children play soccer in the park",
    ],
    [
        "a cat sleeps on the warm sofa",
        "the train leaves the station at noon",
        "he reads a long book every night",
        "birds sing loudly in the morning",
    ],
    [
        "she paints the old wooden fence",
        "the chef cooks pasta for the guests",
        "a boy rides his bike down the hill",
        "people wait for the bus in the rain",
    ],
]
"""Three steps of four sentences, each longer than the token budget: every row has the same length
(no padding), so the reference can run the transformer layers without an attention mask."""

LENGTH = 7

LR = 0.1

EPS = 1e-2


class ReleasedMoCoSE:
    """The released training step (see the module docstring), on copies of the starting weights."""

    def __init__(self, encoder: Any, method: MoCoSE, key_gradient: bool, fifo: bool) -> None:
        p = method.params
        model = encoder.model
        self.emb: Any = copy.deepcopy(model.embeddings)  # MoCoSEModel.online_embeddings
        self.layers: Any = copy.deepcopy(model.encoder)  # online_encoder
        self.pooler: Any = copy.deepcopy(method.pooler)  # online_pooler (PoolerWithoutActive's dense)
        self.proj: Any = copy.deepcopy(method.projection)  # online_projection
        self.pred: Any = copy.deepcopy(method.predictor)  # prodiction
        # prepare(): EMA(model) deep-copies the online modules after the weights are loaded
        self.t_layers: Any = copy.deepcopy(self.layers)
        self.t_pooler: Any = copy.deepcopy(self.pooler)
        self.t_proj: Any = copy.deepcopy(self.proj)
        frozen: list[Any] = [self.t_layers, self.t_pooler]  # the notebook's non_optimizer_list
        if not key_gradient:
            frozen.append(self.t_proj)
        for module in frozen:
            module.requires_grad_(False)
        self.key_gradient, self.fifo = key_gradient, fifo
        self.decay0, self.total, self.ema_step = p.momentum, p.momentum_steps, 0
        self.tau, self.eps, self.size = p.temperature, p.fgsm, p.queue_size
        assert method.queue is not None
        # the queue as the code holds it: columns, newest first (FIFO reference: oldest first)
        self.queue = [r.clone() for r in method.queue.contents()]
        self.features_grad: torch.Tensor | None = None  # mocose.py's global, 0.0 at first

    def trained(self) -> list[nn.Parameter]:
        mods = [self.emb, self.layers, self.pooler, self.proj, self.pred, self.t_proj]
        return [q for m in mods for q in m.parameters() if q.requires_grad]

    def ema(self) -> None:
        """EMA.update: step += 1, the cosine decay, every state_dict entry."""
        self.ema_step += 1
        d = 1 - (1 - self.decay0) * (math.cos(math.pi * self.ema_step / self.total) + 1) / 2
        with torch.no_grad():
            pairs = ((self.t_layers, self.layers), (self.t_pooler, self.pooler), (self.t_proj, self.proj))
            for target, online in pairs:
                for e, m in zip(target.state_dict().values(), online.state_dict().values(), strict=True):
                    e.copy_(d * e + (1.0 - d) * m)

    def embed(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """MoCoSEEmbeddings.forward: the lookup, the hook, fgsm_attack (none before a gradient)."""
        words = self.emb.word_embeddings(batch["input_ids"])
        if words.requires_grad:

            def extract(g: torch.Tensor) -> None:
                self.features_grad = g

            words.register_hook(extract)
            if self.features_grad is not None:
                words = words + self.eps * self.features_grad.sign()
        out: torch.Tensor = self.emb(inputs_embeds=words, token_type_ids=batch["token_type_ids"])
        return out

    def step(self, batch: dict[str, torch.Tensor]) -> float:
        self.ema()  # forward() updates the targets before it computes anything
        v_online = self.embed(batch)
        v_target = self.embed(batch)
        q = self.pred(self.proj(self.pooler(self.layers(v_online)[0][:, 0])))
        if self.key_gradient:
            k = self.t_proj(self.t_pooler(self.t_layers(v_target)[0][:, 0]))
        else:
            with torch.no_grad():
                k = self.t_proj(self.t_pooler(self.t_layers(v_target)[0][:, 0]))
        queue = torch.stack(self.queue) if self.queue else k.new_zeros(0, k.shape[1])
        sim = torch.cat(
            [
                F.cosine_similarity(q[:, None], k[None], dim=-1),
                F.cosine_similarity(q[:, None], queue[None], dim=-1),
            ],
            dim=1,
        )
        loss = F.cross_entropy(sim / self.tau, torch.arange(q.shape[0]))
        params = self.trained()
        for param in params:
            param.grad = None
        loss.backward()
        with torch.no_grad():
            for param in params:
                if param.grad is not None:
                    param.sub_(LR * param.grad)
        keys = [row.detach().clone() for row in k]
        if self.fifo:
            self.queue = (self.queue + keys)[-self.size :]
        else:  # dequeue_and_enqueue: torch.cat((keys.T, queue), dim=1)[:, 0:K]
            self.queue = (keys + self.queue)[: self.size]
        return float(loss.detach())


def harness_step(method: MoCoSE, encoder: Any, batch: dict[str, torch.Tensor], step: int) -> float:
    params = [*encoder.parameters(), *method.trainable_parameters()]
    for param in params:
        param.grad = None
    out = method.compute_loss(TrainingEncode(encoder), batch, step)
    out.loss.backward()
    with torch.no_grad():
        for param in params:
            if param.grad is not None:
                param.sub_(LR * param.grad)
    method.after_step(step)
    return float(out.loss.detach())


CASES = [
    ("full", "released", "random"),
    ("full", "fifo", "empty"),
    ("none", "released", "empty"),
    ("none", "fifo", "random"),
]


@pytest.mark.parametrize(("key_gradient", "queue_order", "queue_init"), CASES)
def test_three_steps_match_the_released_loop(float64, key_gradient, queue_order, queue_init) -> None:
    encoder = load_encoder("random:tiny", seed=4)
    encoder.train()
    no_dropout(encoder)
    params = MoCoSEParams(
        queue_size=6,
        queue_init=queue_init,
        queue_order=queue_order,
        key_gradient=key_gradient,
        fgsm=EPS,
        momentum=0.7,
        momentum_steps=5,
    )
    torch.manual_seed(0)
    method = MoCoSE(params, encoder.hidden_size)
    method.bind(encoder)
    no_dropout(method)
    method.train()
    released = ReleasedMoCoSE(encoder, method, key_gradient == "full", queue_order == "fifo")
    for step, sentences in enumerate(SENTENCES, start=1):
        batch = encoder.tokenize(sentences, max_length=LENGTH)
        assert bool(batch["attention_mask"].all())
        ours, theirs = harness_step(method, encoder, batch, step), released.step(batch)
        assert ours == pytest.approx(theirs, rel=1e-10), step

    def same(a: Any, b: Any) -> None:
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
            torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-10)

    # the harness updates the EMA after each optimiser step, the released code before each forward:
    # after three steps the harness holds what the released code computes first in step 4
    released.ema()
    model: Any = encoder.model
    key: Any = method.key_encoder.model
    assert method.pooler is not None and method.projection is not None and method.predictor is not None
    same(model.embeddings, released.emb)
    same(model.encoder, released.layers)
    same(method.pooler, released.pooler)
    same(method.projection, released.proj)
    same(method.predictor, released.pred)
    same(key.encoder, released.t_layers)  # the EMA, applied before each released forward
    same(method.key_pooler, released.t_pooler)
    same(method.key_projection, released.t_proj)  # optimiser + EMA under "full", EMA only under "none"
    assert method.queue is not None
    torch.testing.assert_close(method.queue.contents(), torch.stack(released.queue), rtol=1e-9, atol=1e-10)
    # the key projection is trained exactly when the keys carry gradient
    trained = {id(p) for p in method.trainable_parameters()}
    assert all((id(p) in trained) == (key_gradient == "full") for p in method.key_projection.parameters())


def test_the_noise_comes_from_the_query_branch_as_the_released_hooks_leave_it(float64) -> None:
    """Both released embedding calls register ``extract``; the hook that fires last wins. The query
    lookup is created first, so autograd reaches it last: the stored gradient is the query's, which is
    what the harness keeps (checked here through the reference's own hooks)."""
    encoder = load_encoder("random:tiny", seed=5)
    encoder.train()
    no_dropout(encoder)
    method = MoCoSE(MoCoSEParams(queue_size=6, fgsm=EPS, momentum_steps=5), encoder.hidden_size)
    method.bind(encoder)
    no_dropout(method)
    released = ReleasedMoCoSE(encoder, method, key_gradient=True, fifo=False)
    batch = encoder.tokenize(SENTENCES[0], max_length=LENGTH)
    released.step(batch)
    harness_step(method, encoder, batch, 1)
    assert released.features_grad is not None and method._noise_grad is not None
    torch.testing.assert_close(method._noise_grad, released.features_grad.sign().float())


@pytest.mark.parametrize("key_dropout", ["on", "off"])
def test_key_dropout_decides_whether_the_key_branch_drops_out(key_dropout) -> None:
    """``on`` (released): the key layers and key projection run in train mode with their rates;
    ``off``: every dropout of the key layers and the key projection is inactive. The shared online
    embedding layer drops out either way (it is the online module, in training mode)."""
    encoder = load_encoder("random:tiny", seed=6)
    encoder.train()
    encoder.packed_training = False  # the dropout modules' own calls, which the hooks see
    method = MoCoSE(MoCoSEParams(key_dropout=key_dropout, queue_size=0, fgsm=0.0), encoder.hidden_size)
    method.bind(encoder)
    method.train()
    seen: dict[str, list[bool]] = {"layers": [], "projection": [], "embedding": []}

    def recorder(where: str) -> Any:
        def hook(module: Any, args: Any) -> None:
            seen[where].append(bool(module.training and module.p > 0))

        return hook

    key: Any = method.key_encoder.model
    handles = [
        sub.register_forward_pre_hook(recorder("layers"))
        for sub in key.encoder.modules()
        if isinstance(sub, nn.Dropout)
    ]
    handles.append(method.key_projection.dropout.register_forward_pre_hook(recorder("projection")))
    embedding: Any = encoder_parts(encoder)["embeddings"]
    handles.append(embedding.dropout.register_forward_pre_hook(recorder("embedding")))
    try:
        batch = encoder.tokenize(SENTENCES[0], max_length=LENGTH)
        method.compute_loss(TrainingEncode(encoder), batch, 1)
    finally:
        for handle in handles:
            handle.remove()
    assert seen["layers"] and seen["projection"]
    assert all(seen["layers"]) == (key_dropout == "on") and any(seen["layers"]) == (key_dropout == "on")
    assert seen["projection"] == [key_dropout == "on"]
    assert seen["embedding"] == [True, True]  # the query's call and the key branch's own call


def test_projection_and_predictor_start_as_bert_starts_its_layers() -> None:
    encoder = load_encoder("random:tiny", seed=7)
    method = MoCoSE(MoCoSEParams(predictor_layers=3), encoder.hidden_size)
    method.bind(encoder)
    assert method.projection is not None and method.predictor is not None and method.pooler is not None
    linears = [
        m
        for head in (method.projection, method.predictor)
        for m in head.modules()
        if isinstance(m, nn.Linear)
    ]
    assert len(linears) == 4
    weights = torch.cat([m.weight.detach().flatten() for m in linears])
    assert float(weights.mean()) == pytest.approx(0.0, abs=2e-3)
    assert float(weights.std()) == pytest.approx(0.02, rel=0.05)  # initializer_range, normal
    assert all(bool((m.bias == 0).all()) for m in linears)
    norms = [m for m in method.predictor.modules() if isinstance(m, nn.LayerNorm)]
    assert norms and all(bool((n.weight == 1).all() and (n.bias == 0).all()) for n in norms)
    model: Any = encoder.model
    torch.testing.assert_close(method.pooler.weight, model.pooler.dense.weight)  # loaded, as released
    torch.testing.assert_close(method.key_projection.dense.weight, method.projection.dense.weight)


def released_enqueue(
    queue: torch.Tensor | None, queue_size: int, k: int, keys: torch.Tensor
) -> tuple[torch.Tensor, int]:
    """``MoCoSEModel.dequeue_and_enqueue`` on the code's column-major queue ``[d, n]``."""
    if queue_size == 0:
        return keys.T.clone(), queue_size + keys.shape[0]
    assert queue is not None
    queue = torch.cat((keys.T, queue), dim=1)
    queue_size += keys.shape[0]
    if queue_size > k:
        queue = queue[:, 0:k]
    return queue, queue_size


@pytest.mark.parametrize("sizes", [(4, 4, 3, 5), (8, 2), (6, 6, 1)])
def test_the_released_queue_order_against_dequeue_and_enqueue(sizes) -> None:
    """Random start (the code's K_start = K / 2: every random column is read) with batches that do
    not divide K = 6, and a batch larger than K (its first K keys stay)."""
    gen = torch.Generator().manual_seed(sum(sizes))
    k, d = 6, 3
    start = F.normalize(torch.randn(k, d, generator=gen), dim=-1)
    ours = NewestFirstQueue(k, d)
    ours.rows.copy_(start)
    ours.filled.fill_(k)
    theirs, count = start.T.clone(), k // 2  # queue_size starts at K_start
    fifo = NegativeQueue(k, d)
    for n in sizes:
        keys = torch.randn(n, d, generator=gen)
        ours.push(keys)
        fifo.push(keys)
        theirs, count = released_enqueue(theirs, count, k, keys)
        torch.testing.assert_close(ours.contents(), theirs.T)
    kept = {tuple(r.tolist()) for r in ours.contents()}
    assert kept != {tuple(r.tolist()) for r in fifo.contents()}  # a row-by-row FIFO keeps other keys


def test_an_empty_queue_fills_with_keys_newest_first() -> None:
    ours = NewestFirstQueue(5, 2)
    first, second = torch.arange(6.0).view(3, 2), -torch.arange(1.0, 7.0).view(3, 2)
    ours.push(first)
    torch.testing.assert_close(ours.contents(), first)
    ours.push(second)
    torch.testing.assert_close(ours.contents(), torch.cat([second, first[:2]]))
