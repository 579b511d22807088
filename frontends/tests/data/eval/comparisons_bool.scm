;; A boolean result: (and (= 1 1) (< 1 2) (>= 3 3) (not (> 1 2)) (not (<= 2 1))) is #t.
;; expect: #t
(and (= 1.0 1.0) (< 1 2) (>= 3 3) (not (> 1 2)) (not (<= 2 1)))
