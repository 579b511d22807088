; ndvm-fuzz regression, oracle: f32
; lane 0: f32 value -8.192e3, f64 -1.52587890625e-5
; found: seed 20261208, program 2282 (ndvm-fuzz --lanes 1); the oracle, not the runtime, was wrong: the determinant of a rank-one matrix cancels products of ~1e11, which f32 rounds at ~1e4
;; param p0: -0.277
(let* ((v1 (sqrt (square -1.69))) (v9 (square (* (loop ((i10 0.0) (a11 v1)) (if (< i10 (* 4.0 (sigmoid p0))) (recur (+ i10 1.0) a11) (+ a11 i10))) (scale v1 (vec 1.28 -1.37)))))) (det (outer (* v9 v9) v9)))
