; ndvm-fuzz regression, oracle: f32
; lane 0: f32 value NaN, f64 0e0
; found: seed 20261252, program 5637 (ndvm-fuzz --lanes 16); a runtime defect: the loop drives a2 to 2.06e-43 in f32 (where f64 reaches 0 exactly), and det_inv's Gauss–Jordan scaled the rank-one outer product's pivot row by 1/pivot, overflowed and gave NaN; det_inv now recomputes a non-finite determinant of a finite matrix by elimination with multipliers (issue 33)
;; param p0: -0.558
;; param p1: 1.469
;; param p2: 1.304
(loop ((i1 0.0) (a2 (eval (list (quote +) p2 1.0)))) (if (< i1 (loop ((i3 0.0) (a4 (trace (mat (vec 1.7 -1.87) (vec p1 p2))))) a4)) (if (< 1.0 (car (cdr (list 1.25 a2)))) (recur 1.0 (+ a2 (/ p0 (+ 1.0 (square 0.99))))) (recur (+ i1 1.0) (* a2 (det (outer (matvec (mat (vec 2.0 p1 p0) (vec i1 i1 -0.75) (vec p2 -0.24 p1)) (vec p0 2.0 p1)) (vec a2 i1 p2)))))) a2))
