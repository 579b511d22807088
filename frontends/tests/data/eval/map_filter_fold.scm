;; map (* y a) over (1 2 3) then fold-left + : 6a = 3; filter y > 1.5 keeps 2 elements; fold-left -
;; from 10 over (1 2) is (10 - 1) - 2 = 7. Total 12, d/da = 6.
;; bind: a=0.5
;; expect: 12
;; grad: a=6
(+ (fold-left + 0.0 (map (lambda (y) (* y a)) (list 1.0 2.0 3.0)))
   (length (filter (lambda (y) (> y 1.5)) (list 1.0 2.0 3.0)))
   (fold-left - 10.0 (list 1.0 2.0)))
