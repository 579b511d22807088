;; Internal defines: y = x^2 = 9, (g 1) = 1 + y = 10; d/da = 2a = 6.
;; bind: a=3
;; expect: 10
;; grad: a=6
(define (f x)
  (define y (* x x))
  (define (g z) (+ z y))
  (g 1.0))
(f a)
