;; u = 2a = 3, v = u + 1 = 4, w = u*v = 12; dw/da = (2u + 1) * 2 = 14.
;; bind: a=1.5
;; expect: 12
;; grad: a=14
(let* ((u (* a 2.0))
       (v (+ u 1.0))
       (w (* u v)))
  w)
