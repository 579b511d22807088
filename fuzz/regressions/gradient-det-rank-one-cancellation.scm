; ndvm-fuzz regression, oracle: gradient
; lane 0: d/dp0 runtime 2.4968821318036008e-6, finite differences 1.9405304923185347e-19 (±1.0e-6)
; found: seed 20261307, program 68794 (ndvm-fuzz --lanes 4); the oracle, not the runtime, was wrong: det of a rank-one 3x3 outer product with entries ~1e4 cancels products of ~1e12; the runtime differentiates the rounded matrix (its cofactors, roundoff of that size), finite differences see the cancelled 0; the gradient oracle now allows the forward oracle's cancellation slack (issue 33)
;; param p0: 0.982
((lambda (x4 x5) (det (outer (matvec (mat (vec -0.75 x5 -0.1) (vec -1.5 x5 x5) (vec 0.52 x5 x5)) (vec x4 x4 x5)) (let ((f15 (lambda (x16) (* x5 (vec p0 0.5 0.52))))) (f15 x5))))) p0 (det ((lambda (x13 x14) (* 2.0 (mat (vec p0 3.0 -0.93) (vec p0 p0 x13) (vec -1.51 x13 -0.75)))) 0.5 -0.38)))
