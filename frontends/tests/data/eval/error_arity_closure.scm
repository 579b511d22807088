;; f takes one argument; the call form is named.
;; error: E002 5:4
(define (f x) x)
(+ 1.0
   (f 1.0 2.0))
