;; do with steps: acc = sum_{i=0}^{4} a*i = 10a = 5 at a = 0.5; d/da = 10.
;; bind: a=0.5
;; expect: 5
;; grad: a=10
(do ((i 0 (+ i 1))
     (acc 0.0 (+ acc (* a i))))
    ((= i 5) acc))
