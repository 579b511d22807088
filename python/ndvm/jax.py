"""``ndvm.jax.program_op``: a model program as a differentiable JAX function (the ``jax`` extra).

The forward pass and the vector-Jacobian product both come from NDVM: ``jax.pure_callback``
calls ``Program.evaluate(grad=True)``, which returns each lane's value and its exact per-lane
gradient with respect to every parameter; the backward pass contracts the cotangent with those
gradients. Parameters are scalars shared by every lane (the calibrator's case); inputs are
per-lane arrays (or scalars) and are not differentiated. Programs that return one number per lane
are supported (a vector-valued program's gradient is that of the sum of its elements, which is
not a Jacobian).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import Program, UsageError, _as_program

__all__ = ["program_op"]


def program_op(program, params: Sequence[str], inputs: Sequence[str] = ()):
    """``f(theta, *xs) -> values``: ``theta`` holds ``params`` in order (shape (P,)), each ``xs[i]``
    binds ``inputs[i]`` (shape (B,) or a scalar), and ``values`` has shape (B,). ``jax.grad`` and
    ``jax.vjp`` of ``f`` with respect to ``theta`` are NDVM's exact gradients; the inputs get a zero
    cotangent. Works under ``jax.jit``; in float64 when ``jax_enable_x64`` is on."""
    import jax
    import jax.numpy as jnp

    program: Program = _as_program(program)
    params, inputs = [str(p) for p in params], [str(i) for i in inputs]
    if not params:
        raise UsageError("program_op needs at least one parameter to differentiate")

    def lanes_of(xs) -> int:
        sizes = {int(np.size(x)) for x in xs if np.ndim(x) > 0}
        if len(sizes) > 1:
            raise UsageError(f"the inputs have different lengths {sorted(sizes)}")
        return sizes.pop() if sizes else 1

    def host(theta, *xs):
        theta = np.asarray(theta, dtype=np.float64).reshape(-1)
        lanes = lanes_of(xs)
        out = program.evaluate(
            params={p: float(v) for p, v in zip(params, theta)},
            inputs={name: np.asarray(x, dtype=np.float64) for name, x in zip(inputs, xs)},
            lanes=lanes,
            grad=True,
        )
        value = np.asarray(out.value, dtype=np.float64)
        if value.shape != (lanes,):
            raise UsageError(f"program_op needs one number per lane, not shape {value.shape}")
        jac = np.stack([np.asarray(out.grads[p], dtype=np.float64) for p in params], axis=1)
        return value, jac

    def call(theta, xs):
        if np.shape(theta) != (len(params),):
            raise UsageError(f"theta has shape {np.shape(theta)}, expected ({len(params)},)")
        lanes = lanes_of(xs)
        dtype = jnp.result_type(theta)
        shapes = (
            jax.ShapeDtypeStruct((lanes,), dtype),
            jax.ShapeDtypeStruct((lanes, len(params)), dtype),
        )

        def typed(theta, *xs):
            value, jac = host(theta, *xs)
            return value.astype(dtype), jac.astype(dtype)

        return jax.pure_callback(typed, shapes, theta, *xs, vmap_method="sequential")

    @jax.custom_vjp
    def f(theta, *xs):
        return call(theta, xs)[0]

    def forward(theta, *xs):
        value, jac = call(theta, xs)
        return value, (jac, xs)

    def backward(residual, cotangent):
        jac, xs = residual
        return (cotangent @ jac, *(jnp.zeros_like(x) for x in xs))

    f.defvjp(forward, backward)
    return f
