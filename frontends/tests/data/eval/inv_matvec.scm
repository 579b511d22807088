;; inv diag(a, b) times (1, 1) sums to 1/a + 1/b = 0.75; gradients -1/a^2 = -0.25, -1/b^2 = -0.0625.
;; bind: a=2 b=4
;; expect: 0.75
;; grad: a=-0.25 b=-0.0625
(vsum (matvec (inv (mat (vec a 0.0) (vec 0.0 b))) (vec 1.0 1.0)))
