;; logdet diag(a, b) = ln(ab) = ln 6 (python math.log(6)); gradients 1/a = 0.5, 1/b = 1/3.
;; bind: a=2 b=3
;; expect: 1.791759469228055
;; grad: a=0.5 b=0.3333333333333333
(logdet (mat (vec a 0.0) (vec 0.0 b)))
