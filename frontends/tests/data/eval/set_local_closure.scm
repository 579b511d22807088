;; set! on locals: an accumulator closure keeps its total (a, then 3a), and a let variable is
;; squared in place. Result: a² + (3a + 1) = 0.25 + 2.5 = 2.75 at a = 0.5; d/da = 2a + 3 = 4.
;; bind: a=0.5
;; expect: 2.75
;; grad: a=4
(define (make-acc)
  (let ((total 0.0))
    (lambda (x)
      (set! total (+ total x))
      total)))
(define acc (make-acc))
(acc a)
(acc (* 2.0 a))
(let ((y a))
  (set! y (* y y))
  (+ y (acc 1.0)))
