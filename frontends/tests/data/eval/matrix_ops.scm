;; trace(I [[a 1] [2 b]]) = a + b = 3; sum(zeros 3) = 0; sum(ones 3) = 3; trace(outer (1,2) (3,4)) =
;; 1*3 + 2*4 = 11; sum(scale 2 (a, b)) = 2a + 2b = 6; transpose [[1 2] [3 4]] row 0 col 1 = 3.
;; Total 26; d/da = d/db = 1 + 2 = 3.
;; bind: a=1 b=2
;; expect: 26
;; grad: a=3 b=3
(+ (trace (matmul (eye 2) (mat (vec a 1.0) (vec 2.0 b))))
   (vsum (zeros 3))
   (vsum (ones 3))
   (trace (outer (vec 1.0 2.0) (vec 3.0 4.0)))
   (vsum (scale 2.0 (vec a b)))
   (ref (ref (transpose (mat (vec 1.0 2.0) (vec 3.0 4.0))) 0) 1))
