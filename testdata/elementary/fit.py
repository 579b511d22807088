#!/usr/bin/env python3
"""Near-minimax polynomial coefficients (Chebyshev fits, mpmath at 60 digits) of the elementary
functions in ndvm-core's core/src/elementary.rs; prints each fit, lowest degree first, with its
maximum absolute error on the interval. Run: python3 fit.py (needs mpmath)."""
import mpmath as mp

mp.mp.dps = 60


def fit(name, f, a, b, deg):
    poly, err = mp.chebyfit(f, [a, b], deg + 1, error=True)
    print(f"{name}: degree {deg} on [{mp.nstr(a, 8)}, {mp.nstr(b, 8)}], max error {mp.nstr(err, 3)}")
    for i, c in enumerate(reversed(poly)):
        print(f"  c{i} = {mp.nstr(c, 20, strip_zeros=False)}")


margin = mp.mpf("1.0001")
# exp: e^r = 1 + r + r^2 Q(r), |r| <= ln2/2
r_max = mp.log(2) / 2 * margin
fit("exp Q", lambda r: (mp.exp(r) - 1 - r) / r**2 if r else mp.mpf(1) / 2, -r_max, r_max, 10)
# sin r = r + r^3 S(z), cos r = 1 - z/2 + z^2 C(z), z = r^2, |r| <= pi/4
z_max = (mp.pi / 4 * margin) ** 2
fit("sin S", lambda z: (mp.sin(mp.sqrt(z)) - mp.sqrt(z)) / mp.sqrt(z) ** 3 if z else -mp.mpf(1) / 6, 0, z_max, 6)
fit("cos C", lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z**2 if z else mp.mpf(1) / 24, 0, z_max, 5)
# ln(1 + f) = f - f^2/2 + s (f^2/2 + z R(z)), s = f/(2 + f), z = s^2, f + 1 in [sqrt2/2, sqrt2)
s_max = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1) * margin
fit("ln R", lambda z: (2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 2) / z if z else mp.mpf(2) / 3, 0, s_max**2, 7)


def split(v, bits):
    """`v` rounded to `bits` significant bits."""
    e = mp.floor(mp.log(abs(v), 2))
    scale = mp.mpf(2) ** (bits - 1 - e)
    return mp.nint(v * scale) / scale


# Cody-Waite pieces: ln 2 = LN2_HI (32 bits) + LN2_LO; pi/2 = P1 + P2 + P3 (33 bits each) + P4.
hi = split(mp.log(2), 32)
print(f"LN2_HI = {float(hi)!r}, LN2_LO = {float(split(mp.log(2) - hi, 53))!r}")
rest = mp.pi / 2
for i, bits in enumerate((33, 33, 33, 53)):
    p = split(rest, bits)
    print(f"PIO2_{i + 1} = {float(p)!r}")
    rest -= p
