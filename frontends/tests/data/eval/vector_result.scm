;; A vector value: (a, b) * 2 + 1 = (3, 5) at a = 1, b = 2; the gradient is of the sum: 2 each.
;; bind: a=1 b=2
;; expect: [3 5]
;; grad: a=2 b=2
(+ (* (vec a b) 2.0) 1.0)
