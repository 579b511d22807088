;; Named let: sum_{i=1}^{10} a*i = 55a = 27.5 at a = 0.5; d/da = 55.
;; bind: a=0.5
;; expect: 27.5
;; grad: a=55
(let sum ((i 1) (acc 0.0))
  (if (> i 10)
      acc
      (sum (+ i 1) (+ acc (* a i)))))
