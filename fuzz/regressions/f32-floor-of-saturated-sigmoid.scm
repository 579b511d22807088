; ndvm-fuzz regression, oracle: f32
; lane 0: f32 value 1e0, f64 0e0
; found: seed 12, program 2265 (ndvm-fuzz --lanes 1); the oracle, not the runtime, was wrong
;; param p0: 1.361
;; param p1: -0.041
(floor (sigmoid (letrec ((f1 (lambda (n2 a3) (if (< n2 0.5) a3 (f1 (- n2 1.0) (+ (* 0.5 a3) (trace (mat (vec a3 p0) (vec p0 p0))))))))) (f1 4.0 (car (let ((f7 (lambda (x8) (list p0)))) (f7 -1.03)))))))
