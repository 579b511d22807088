;; reference dialect: 0 is false, so filter drops the zeros: a + b.
;; dialect: reference
;; bind: a=0.7 b=1.3
(apply + (filter (lambda (x) x) (list a 0.0 b 0.0)))
