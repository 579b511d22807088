; ndvm-fuzz regression, oracle: gradient
; Written by hand after the fuzzer's det findings: on lane 0 (p0 = 1) rows 0 and 1 are
; proportional, elimination meets an exact zero pivot and A⁻¹ is NaN, yet d det / d p0 is the
; cofactor 4 (det = 4 (p0 - 1)); lane 1 is invertible, so the batch mixes both paths.
;; param p0: 1.0 0.5
(det (mat (vec p0 2.0 3.0) (vec 2.0 4.0 6.0) (vec 1.0 0.0 1.0)))
