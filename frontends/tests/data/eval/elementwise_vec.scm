;; (a,b)*(2,3) + -(1,1) + (a,b)/2 summed: 2a + 3b - 2 + (a + b)/2 = 7.5 at a = 1, b = 2;
;; d/da = 2.5, d/db = 3.5.
;; bind: a=1 b=2
;; expect: 7.5
;; grad: a=2.5 b=3.5
(vsum (+ (* (vec a b) (vec 2.0 3.0))
         (- (vec 1.0 1.0))
         (/ (vec a b) 2.0)))
