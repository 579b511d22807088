;; error: P001 at 3:1
(define x 1)
(define (f y)
  (+ y 1)
(f 2)
