;; Reference dialect clamps sqrt/log arguments to 1e-8 with zero gradient in the clamp:
;; sqrt(1e-8) + ln(1e-8) = 1e-4 - 18.420680743952367 (python), d/dx = 0.
;; dialect: reference
;; bind: x=1
;; expect: -18.420580743952367
;; grad: x=0
(+ (sqrt (- 0.0 x)) (log (- 0.0 x)))
