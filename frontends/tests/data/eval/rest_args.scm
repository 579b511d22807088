;; (f a 1 2 3): first = a, rest has 3 elements: 3a = 6; ((lambda args ...) 1 2) = 2. d/da = 3.
;; bind: a=2
;; expect: 8
;; grad: a=3
(define (f first . rest) (* first (length rest)))
(+ (f a 1 2 3) ((lambda args (length args)) 1 2))
