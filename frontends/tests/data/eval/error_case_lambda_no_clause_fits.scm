;; No case-lambda clause takes three arguments: the last clause's arity error, at that clause.
;; error: E002 5:3
(define f (case-lambda
  ((x) x)
  ((x y) (+ x y))))
(f 1.0 2.0 3.0)
