;; The free variable zz on the last line is unbound (decode time).
;; error: E001 5:12
(define (f x)
  (* x 2.0))
(+ (f 1.0) zz)
