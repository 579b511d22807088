;; An unsupported word used as a value (not at the head of a form) names itself too.
;; error: E005 5:9
(define (f x) x)
(map f
  (list force 1.0))
