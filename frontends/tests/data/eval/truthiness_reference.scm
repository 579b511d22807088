;; Reference dialect: 0 is false: 20 + 200 = 220.
;; dialect: reference
;; expect: 220
(+ (if 0 10.0 20.0) (cond (0 100.0) (else 200.0)))
