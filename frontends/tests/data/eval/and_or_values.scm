;; and/or short-circuit and return values: 1 (and true) + 4a = 2 (or's value) + 100 ((and) is #t)
;; + 1000 ((or) is #f) + 3a = 1.5 (and's last value) = 1104.5 at a = 0.5; d/da = 4 + 3 = 7.
;; bind: a=0.5
;; expect: 1104.5
;; grad: a=7
(+ (if (and (> a 0.0) (< a 1.0)) 1.0 0.0)
   (or #f (* a 4.0))
   (if (and) 100.0 0.0)
   (if (or) 0.0 1000.0)
   (and 1.0 (* a 3.0)))
