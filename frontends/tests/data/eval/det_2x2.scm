;; det [[a b] [c d]] = ad - bc = 14 - 15 = -1; gradient (d, -c, -b, a) = (7, -5, -3, 2).
;; bind: a=2 b=3 c=5 d=7
;; expect: -1
;; grad: a=7 b=-5 c=-3 d=2
(det (mat (vec a b) (vec c d)))
