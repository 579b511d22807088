;; The seed inline-cache example: a define inside an if arm assigns the body's x.
;; f(1,1) = 100, f(0,2) = 2, f(1,3) = 100: 202.
;; expect: 202
(define (f n x) (begin (if (> n 0) (define x 100.0) 0) x))
(+ (f 1 1.0) (+ (f 0 2.0) (f 1 3.0)))
