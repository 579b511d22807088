; ndvm-fuzz regression, oracle: gradient
; lane 0: d/dp0 runtime NaN, finite differences 0e0 (±1.0e-6)
; found: seed 1, program 195
;; param p0: 1.294
(det (outer (vec p0 p0) (vec 0.5 p0)))
