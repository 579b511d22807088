;; loop/recur: x^4 = 5.0625 at x = 1.5; d/dx = 4x^3 = 13.5.
;; bind: x=1.5
;; expect: 5.0625
;; grad: x=13.5
(loop ((i 0) (acc 1.0))
  (if (= i 4)
      acc
      (recur (+ i 1) (* acc x))))
