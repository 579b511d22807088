#!/usr/bin/env python3
"""Near-minimax polynomial coefficients (Chebyshev fits, mpmath at 40 digits) of the f32
elementary functions in ndvm-core's core/src/elementary32.rs, which evaluate in f64 and round
once; prints each fit's coefficients, lowest degree first, rounded to f64, and the worst relative
error of the quantity it approximates on a dense grid (the f32 results need < 2^-25 to be
faithful). Run: python3 fit32.py (needs mpmath)."""
import mpmath as mp

mp.mp.dps = 40
margin = mp.mpf("1.0001")


def fit(name, f, a, b, deg, err):
    """Fits `f` on [a, b] with degree `deg`; `err(coeffs, t)` is the relative error at t."""
    poly = mp.chebyfit(f, [a, b], deg + 1)
    c = [mp.mpf(float(v)) for v in reversed(poly)]
    worst = max(abs(err(c, a + (b - a) * i / 4000)) for i in range(4001))
    print(f"{name}: degree {deg} on [{mp.nstr(a, 8)}, {mp.nstr(b, 8)}], worst relative error "
          f"2^{float(mp.log(worst, 2)):.1f}")
    for i, v in enumerate(c):
        print(f"  c{i} = {float(v)!r}")


def poly(c, u):
    acc = mp.mpf(0)
    for k in reversed(c):
        acc = acc * u + k
    return acc


def rel(got, want):
    return (got - want) / want if want else got


# e^r - 1 = r + r^2 Q(r), |r| <= ln2/2
r_max = mp.log(2) / 2 * margin
fit("exp Q", lambda r: (mp.exp(r) - 1 - r) / r**2 if r else mp.mpf(1) / 2, -r_max, r_max, 6,
    lambda c, r: rel(r + r * r * poly(c, r), mp.expm1(r)))
# sin r = r + r z S(z), cos r = 1 + z C(z), z = r^2, |r| <= pi/4
z_max = (mp.pi / 4 * margin) ** 2
root = mp.sqrt
fit("sin S", lambda z: (mp.sin(root(z)) - root(z)) / root(z) ** 3 if z else -mp.mpf(1) / 6, 0,
    z_max, 3, lambda c, z: rel(root(z) * (1 + z * poly(c, z)), mp.sin(root(z))))
fit("cos C", lambda z: (mp.cos(root(z)) - 1) / z if z else -mp.mpf(1) / 2, 0, z_max, 3,
    lambda c, z: rel(1 + z * poly(c, z), mp.cos(root(z))))
# ln(1 + f) = 2s + s z R(z), s = f / (2 + f), z = s^2, 1 + f in [sqrt2/2, sqrt2)
s_max = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1) * margin
for deg in (3, 4):
    fit(f"ln R (degree {deg})",
        lambda z: (2 * mp.atanh(root(z)) / root(z) - 2) / z if z else mp.mpf(2) / 3, 0, s_max**2,
        deg, lambda c, z: rel(root(z) * (2 + z * poly(c, z)), 2 * mp.atanh(root(z))))
# atan v = v + v z A(z), z = v^2, |v| <= sqrt2 - 1
v_max = (mp.sqrt(2) - 1) * margin
fit("atan A", lambda z: (mp.atan(root(z)) / root(z) - 1) / z if z else -mp.mpf(1) / 3, 0,
    v_max**2, 5, lambda c, z: rel(root(z) * (1 + z * poly(c, z)), mp.atan(root(z))))


def split(v, bits):
    """`v` rounded to `bits` significant bits."""
    e = mp.floor(mp.log(abs(v), 2))
    scale = mp.mpf(2) ** (bits - 1 - e)
    return mp.nint(v * scale) / scale


# Cody-Waite pieces: pi/2 = P1 (33 bits, so k P1 is exact for |k| < 2^20) + P2 (53 bits) + rest.
p1 = split(mp.pi / 2, 33)
p2 = split(mp.pi / 2 - p1, 53)
print(f"PIO2_1 = {float(p1)!r}, PIO2_2 = {float(p2)!r}, "
      f"rest 2^{float(mp.log(abs(mp.pi / 2 - p1 - p2), 2)):.1f}")
