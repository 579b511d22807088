;; R7RS naming: modulo floors (-7 mod 2 = 1), remainder truncates (-1), quotient truncates (-3),
;; floor -3.5 = -4. Total 1 - 1 - 3 - 4 = -7.
;; expect: -7
(+ (modulo -7 2) (remainder -7 2) (quotient -7 2) (floor -3.5))
