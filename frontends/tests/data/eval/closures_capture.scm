;; Each closure keeps its own k: add3(x) = 3.5, add2a(3.5) = 3.5 + 2a = 5.5; d/da = 2, d/dx = 1.
;; bind: a=1 x=0.5
;; expect: 5.5
;; grad: a=2 x=1
(define (make-adder k) (lambda (y) (+ y k)))
(let ((add2a (make-adder (* 2.0 a)))
      (add3 (make-adder 3.0)))
  (add2a (add3 x)))
