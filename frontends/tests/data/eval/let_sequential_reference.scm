;; Reference dialect: let binds sequentially (the seed system's let*), so y sees x = 2: 10*2 + 2 = 22.
;; dialect: reference
;; expect: 22
(let ((x 1.0))
  (let ((x 2.0) (y x))
    (+ (* 10.0 x) y)))
