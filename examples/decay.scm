;; exponential decay a e^(-k t)
(* a (exp (- (* k t))))
