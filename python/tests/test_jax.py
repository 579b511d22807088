"""``ndvm.jax.program_op``: values equal ``Program.evaluate``; ``jax.grad`` equals NDVM's exact
gradients and agrees with central finite differences; it works under ``jax.jit``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import ndvm
from ndvm.jax import program_op

jax.config.update("jax_enable_x64", True)

SRC = "(params (a free 1.0) (k positive 1.0)) (* a (exp (- (* k t))))"
T = np.linspace(0.0, 3.0, 7)
Y = 1.7 * np.exp(-0.4 * T)


def test_values_equal_evaluate_bit_for_bit():
    f = program_op(ndvm.Program(SRC), ["a", "k"], ["t"])
    theta = jnp.array([2.0, 0.5])
    direct = ndvm.Program(SRC).evaluate(params={"a": 2.0, "k": 0.5}, inputs={"t": T})
    assert np.asarray(f(theta, jnp.asarray(T))).tobytes() == direct.value.tobytes()


def _loss(f):
    return lambda theta: jnp.sum((f(theta, jnp.asarray(T)) - Y) ** 2)


def test_grad_is_ndvms_gradient_and_matches_finite_differences():
    f = program_op(SRC, ["a", "k"], ["t"])
    loss = _loss(f)
    theta = np.array([2.0, 0.5])
    g = np.asarray(jax.grad(loss)(jnp.asarray(theta)))
    # The chain rule by hand from evaluate's per-lane gradients.
    r = ndvm.Program(SRC).evaluate(params={"a": 2.0, "k": 0.5}, inputs={"t": T})
    residual = r.value - Y
    expected = np.array([np.sum(2 * residual * r.grads[p]) for p in ("a", "k")])
    assert np.allclose(g, expected, rtol=1e-12, atol=0)
    h = 1e-6
    for i in range(2):
        step = np.zeros(2)
        step[i] = h
        fd = (float(loss(jnp.asarray(theta + step))) - float(loss(jnp.asarray(theta - step)))) / (2 * h)
        assert abs(g[i] - fd) <= 1e-6 * max(1.0, abs(fd)), (i, g[i], fd)


def test_it_runs_under_jit_and_fits_by_gradient_descent():
    loss = jax.jit(_loss(program_op(SRC, ["a", "k"], ["t"])))
    grad = jax.jit(jax.grad(_loss(program_op(SRC, ["a", "k"], ["t"]))))
    theta = jnp.array([1.0, 1.0])
    start = float(loss(theta))
    for _ in range(200):
        theta = theta - 0.05 * grad(theta)
    assert float(loss(theta)) < 1e-3 * start
