;; sin+cos+tan+exp+log+sqrt+|-x|+x^3+tanh at x = 0.5 and its derivative
;; cos - sin + 1/cos^2 + exp + 1/x + 1/(2 sqrt x) + 1 + 3x^2 + (1 - tanh^2), both from python's math module.
;; bind: x=0.5
;; expect: 4.653108618925105
;; grad: x=8.588879218548298
(+ (sin x) (cos x) (tan x) (exp x) (log x) (sqrt x) (abs (- x)) (pow x 3.0) (tanh x))
