; ndvm-fuzz regression, oracle: f32
; lane 0: f32 d/dp0 3.75e-1, f64 3.2946081436239183e-1
; found: seed 20261308, program 1710 (16 lanes), shrunk to one lane
; not a runtime defect: the 3x3 has two equal rows, so d det/d p0 is 0 exactly, and the cofactor
; sum that computes it cancels products of ~8; in f32 its rounding, carried by the det result's
; adjoint (~2.9e6 through the loops), moves the gradient by ~0.05. The f32 oracle now allows
; a determinant's cancellation scale times that adjoint (oracle.rs, det_adjoints).
;; param p0: 0.514
(let ((w12 p0)) (+ (loop ((i5 0.0) (a6 (loop ((i7 0.0) (a8 (det (mat (vec p0 p0 1.25) (vec p0 p0 1.25) (vec p0 p0 p0))))) (if (< i7 (* 4.0 p0)) (recur (+ i7 1.0) (let ((w11 a8)) (+ (loop ((i9 0.0) (a10 a8)) (begin (set! w11 (+ w11 a10)) (if (< i9 (* 4.0 p0)) (recur (+ i9 1.0) (* a10 3.0)) a10))) w11))) (+ a8 (case 1.0 ((1.0 2.0) a8))))))) (begin (set! w12 (tanh (+ w12 a6))) (if (< i5 (exp (+ 1.0 p0))) (recur (+ i5 1.0) a6) a6))) w12))
