;; Default dialect: only #f is false, so 0 is true: 10 + 100 = 110.
;; expect: 110
(+ (if 0 10.0 20.0) (cond (0 100.0) (else 200.0)))
