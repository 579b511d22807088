;; (apply + 1 (list a 2)) = 1 + a + 2 = 6 and (apply max (list a 0.5)) = a = 3: total 9, d/da = 2.
;; bind: a=3
;; expect: 9
;; grad: a=2
(+ (apply + 1.0 (list a 2.0))
   (apply max (list a 0.5)))
