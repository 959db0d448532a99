"""The hand-written backward pass of `model.forward` and Adam: one training step as one array program.

`train_step(ops, ...)` runs forward, loss, backward and Adam (microgpt's: lr 0.01 decayed linearly,
beta1 0.85, beta2 0.99, eps 1e-8) and returns the loss and the new weights and moments; under `@tt.jit`
(`TRAIN_STEP`) tinyton traces the whole step once and fuses it.
"""

from __future__ import annotations

from model import (
    Config,
    TinytonOps,
    forward,
    layer_params,
    log_softmax,
    loss_of,
    merge_heads,
    one_hot,
    split_heads,
)

import tinyton as tt

BETA1, BETA2, ADAM_EPS = 0.85, 0.99, 1e-8


def rmsnorm_backward(dy, y, r):
    """`y = x * r`, `r = 1 / sqrt(mean(x^2) + eps)`: `dx = r * (dy - y * mean(dy * y))`."""
    return r * (dy - y * (dy * y).mean(axis=-1, keepdims=True))


def weight_grad(x, dy):
    """`d(x @ w)/dw` summed over every leading axis: `x2ᵀ @ dy2` of the rows flattened."""
    return x.reshape(-1, x.shape[-1]).T @ dy.reshape(-1, dy.shape[-1])


def backward(ops, cfg: Config, params, idx, targets, mask, logits, saved):
    """Gradients of `loss_of` with respect to every weight, in `params` order."""
    x, r0, layers = saved
    wte, wpe, lm_head = params[:3]
    probs = ops.exp(log_softmax(ops, logits))
    weight = (mask / mask.sum())[..., None]
    dlogits = (probs - one_hot(ops, targets, cfg.vocab)) * weight
    d_lm_head = weight_grad(x, dlogits)
    dx = dlogits @ lm_head.T
    scale = 1.0 / float(cfg.head_dim) ** 0.5
    layer_grads = []
    for i in reversed(range(cfg.n_layer)):
        wq, wk, wv, wo, fc1, fc2 = layer_params(params, i)
        h, r1, q, k, v, p, a, h2, r2, u, g = layers[i]
        d_fc2 = weight_grad(g, dx)
        du = ops.where(u > 0, dx @ fc2.T, 0.0)
        d_fc1 = weight_grad(h2, du)
        dx2 = dx + rmsnorm_backward(du @ fc1.T, h2, r2)
        d_wo = weight_grad(a, dx2)
        do = split_heads(ops, cfg, dx2 @ wo.T)
        dp = do @ v.mT
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale
        dq, dk, dv = (merge_heads(ops, cfg, t) for t in (ds @ k, ds.mT @ q, p.mT @ do))
        dh = dq @ wq.T + dk @ wk.T + dv @ wv.T
        layer_grads.append([weight_grad(h, dq), weight_grad(h, dk), weight_grad(h, dv), d_wo, d_fc1, d_fc2])
        dx = dx2 + rmsnorm_backward(dh, h, r1)
    y0 = ops.take(wte, idx, 0) + wpe
    dx0 = rmsnorm_backward(dx, y0 * r0, r0)
    d_wte = weight_grad(one_hot(ops, idx, cfg.vocab), dx0)
    d_wpe = dx0.sum(axis=0)
    return [d_wte, d_wpe, d_lm_head, *(g for grads in reversed(layer_grads) for g in grads)]


def adam(ops, param, grad, m, v, lr, bias1, bias2):
    """One Adam update; `lr` is this step's rate, `bias1/2` are `1 - beta^t` (all shape (1,) arrays)."""
    m = BETA1 * m + (1 - BETA1) * grad
    v = BETA2 * v + (1 - BETA2) * grad * grad
    return param - lr * (m / bias1) / ((v / bias2) ** 0.5 + ADAM_EPS), m, v


def train_step(ops, cfg: Config, idx, targets, mask, lr, bias1, bias2, *state):
    """`state` is the weights, then their first moments, then their second moments (each in
    `param_shapes` order). Returns `(loss, *new_state)`."""
    n = cfg.n_params
    params, ms, vs = state[:n], state[n : 2 * n], state[2 * n :]
    saved: list = []
    logits = forward(ops, cfg, params, idx, saved)
    loss = loss_of(ops, cfg, logits, targets, mask)
    grads = backward(ops, cfg, params, idx, targets, mask, logits, saved)
    updates = [adam(ops, p, g, m, v, lr, bias1, bias2) for p, g, m, v in zip(params, grads, ms, vs)]
    return (loss, *(u[0] for u in updates), *(u[1] for u in updates), *(u[2] for u in updates))


@tt.jit
def train_step_program(cfg, idx, targets, mask, lr, bias1, bias2, *state):
    return train_step(TinytonOps, cfg, idx, targets, mask, lr, bias1, bias2, *state)
