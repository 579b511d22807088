;; Variadic arithmetic folds left: (- 10 1 2) = 7, (* 2 3 4) = 24, (/ 64 2 4) = 8, (- x) = -x.
;; bind: x=1.5
;; expect: 37.5
;; grad: x=-1
(+ (- 10.0 1.0 2.0) (* 2.0 3.0 4.0) (/ 64.0 2.0 4.0) (- x))
