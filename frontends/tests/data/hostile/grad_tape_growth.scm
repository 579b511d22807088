;; A parameter-dependent loop recorded with gradients: every iteration appends tape nodes and
;; payloads until the memory limit (or the work budget) stops it.
;; grad: a=0.5
;; expect: E013|E007
(loop ((i 0) (acc 0.0))
  (if (> i (* 1e9 a)) acc (recur (+ i 1) (+ acc (* a i)))))
