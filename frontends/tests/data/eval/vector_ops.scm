;; dot((a,2),(3,b)) = 3a + 2b = 13; norm(3,4) = 5; vlen of a 3-vector = 3; (e1 x e2)_2 = 1.
;; Total 22; d/da = 3, d/db = 2.
;; bind: a=1 b=5
;; expect: 22
;; grad: a=3 b=2
(+ (dot (vec a 2.0) (vec 3.0 b))
   (norm (vec 3.0 4.0))
   (vlen (vec 1 2 3))
   (ref (cross (vec 1.0 0.0 0.0) (vec 0.0 1.0 0.0)) 2))
