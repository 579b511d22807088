;; Default dialect: let binds in parallel, so y sees the outer x = 1: 10*2 + 1 = 21.
;; expect: 21
(let ((x 1.0))
  (let ((x 2.0) (y x))
    (+ (* 10.0 x) y)))
