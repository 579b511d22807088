; ndvm-fuzz regression, oracle: gradient
; lane 0: d/dp0 runtime NaN, finite differences 0e0 (±1.0e-6)
; found: seed 1, program 29
;; param p0: -0.885
;; param p1: 1.302
(loop ((i1 0.0) (tanh 0.5)) (det (outer (vec p0 i1 i1) (vec p1 p0 0.5))))
