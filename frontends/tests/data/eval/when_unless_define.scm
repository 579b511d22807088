;; y = 2a = 2: (when (> y 1) 3y) = 6, (unless (< y 1) y) = 2; total 8 = 8a, d/da = 8.
;; bind: a=1
;; expect: 8
;; grad: a=8
(define y (* a 2.0))
(+ (when (> y 1.0) (* y 3.0))
   (unless (< y 1.0) y))
