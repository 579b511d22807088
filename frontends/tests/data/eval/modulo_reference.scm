;; Seed naming (swapped): modulo truncates (-7 -> -1), remainder floors (-7 -> 1): -10 + 1 = -9.
;; dialect: reference
;; expect: -9
(+ (* 10.0 (modulo -7 2)) (remainder -7 2))
